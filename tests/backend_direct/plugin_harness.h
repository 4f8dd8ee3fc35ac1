// plugin_harness.h — drives a backend plugin's function table with ranks as forked
// processes, without libprocgroup: each child has its own environment and can be killed on
// purpose (the gloo and ucx direct tests). Each child dlopens the plugin, negotiates it with
// the backend test's own host services, and creates its group through a file store in a
// directory the ranks share. Buffers, ops and works are direct_harness.h's, where ranks are
// threads instead.
//
//   const PluginUnderTest kGloo = {PG_GLOO_PATH, &gloo_host, "gloo", 90};
//   run_world(kGloo, 3, {}, [](RankEnv& r) {
//     float x[4] = {1, 2, 3, 4};
//     pg_buffer_t b = cpu(x, 4, PG_DTYPE_F32);
//     r.expect(r.run(make_op(PG_OP_ALLREDUCE, b, b)) == PG_OK, "allreduce");
//   });   // a gtest failure unless every child exits cleanly within the limit
//
// Children cannot use gtest assertions (the failure would stay in the child): they report
// through RankEnv::expect, which prints the failure and sets the exit code.
#pragma once

#include <cstdint>
#include <functional>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

#include "direct_harness.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::plugin_harness {

// ---- Buffers, ops and works: direct_harness.h's ------------------------------------------

using direct::absent;
using direct::cpu;
using direct::OpArgs;
using direct::take_error;  // this thread's last set_error message, forgotten
using direct::Work;

// direct::op under a name that the tests' variables called `op` do not hide.
inline pg_backend_op_t make_op(pg_op_t kind, pg_buffer_t input, pg_buffer_t output, OpArgs a = {}) {
  return direct::op(kind, input, output, a);
}

const char* status_name(pg_status_t status);

// ---- Host services ------------------------------------------------------------------------

using HostReduceFn = decltype(pg_host_services_t::reduce);
using HostScaleDownFn = decltype(pg_host_services_t::scale_down);

// set_error feeds take_error(); log prints warnings and worse and keeps every line for
// logged(). Only the kernels differ between plugins, so the backend test supplies them.
pg_host_services_t make_host(HostReduceFn reduce, HostScaleDownFn scale_down);

// Every line the plugin logged in this process, any level.
std::vector<std::string> logged();

// The core's own kernels (pg_collectives), as libprocgroup's host services hand them to a
// plugin, failures reported through set_error. Without reduce_to the table ends where an
// older core's does. scale_down may be replaced by a test's own, independent one.
pg_host_services_t host_with_core_kernels(bool with_reduce_to = true);

// ---- The plugin ---------------------------------------------------------------------------

struct PluginUnderTest {
  const char* path = nullptr;                // the plugin's .so
  const pg_host_services_t* host = nullptr;  // must outlive every load (static)
  const char* name = "";                     // names the ranks' shared directory
  int limit_s = 90;                          // run_world's default time limit
};

// A dlopen'd plugin negotiated with its test's host; status() and error() say why not.
// Unlike direct::Plugin it never throws (a child reports instead) and takes the host, which
// differs per plugin. Unloaded on destruction, so its groups must be destroyed first.
class Plugin {
 public:
  explicit Plugin(const PluginUnderTest& plugin, uint32_t min_version = 1,
                  uint32_t max_version = 1);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;
  pg_status_t status() const { return status_; }  // of negotiate
  const std::string& error() const { return error_; }
  const pg_backend_negotiate_out_t& info() const { return info_; }
  const pg_backend_ops_t& ops() const { return *info_.ops; }

 private:
  void* handle_ = nullptr;
  pg_backend_negotiate_out_t info_{};
  pg_status_t status_ = PG_ERR_INTERNAL;
  std::string error_;
};

// ---- A file store shared by the ranks -------------------------------------------------------

// One file per key, written by rename so a reader never sees half a value; add() takes a
// lock file, as the ranks are separate processes.
class FileStore {
 public:
  FileStore(std::string dir, int64_t default_timeout_ms);
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;
  const pg_host_store_t* get() const { return &store_; }
  void put(const std::string& key, const std::string& value);
  // Waits up to timeout_ms for key; false if it never appeared.
  bool fetch(const std::string& key, int64_t timeout_ms, std::string* value);

 private:
  std::string path(const std::string& key) const;
  std::string dir_;
  int64_t timeout_ms_;
  pg_host_store_t store_{};
};

// Creates rank's group of size through store (for bodies that do it themselves).
pg_status_t create_group(const pg_backend_ops_t& ops, FileStore& store, int rank, int size,
                         int64_t timeout_ms, pg_backend_group_t* out,
                         const char* master_addr = "127.0.0.1");

// ---- Ranks as processes ---------------------------------------------------------------------

struct RankEnv {
  int rank = 0;
  int size = 0;
  const pg_backend_ops_t* ops = nullptr;
  pg_backend_group_t group = nullptr;
  FileStore* store = nullptr;
  uint64_t seq = 0;
  int failures = 0;

  // Issues o, numbered like the core (seq from 1), and returns its work.
  Work start(pg_backend_op_t o);
  // start + wait; *error gets the message of a failure.
  pg_status_t run(const pg_backend_op_t& o, std::string* error = nullptr);
  void expect(bool ok, const std::string& what,
              std::source_location where = std::source_location::current());
  // The failure names both statuses and this thread's last error, which it leaves in place.
  void expect_status(pg_status_t got, pg_status_t want, const std::string& what,
                     std::source_location where = std::source_location::current());
};

struct WorldOptions {
  int64_t timeout_ms = 20000;
  std::vector<std::pair<std::string, std::string>> env;  // setenv in every child
  std::vector<int> killed;                               // ranks expected to die of SIGKILL
  bool create_group = true;  // false: the body creates (or not) its group itself
  std::string master_addr = "127.0.0.1";
  int limit_s = 0;  // children still running then are killed (a failure); 0: the plugin's
};

// Forks size children that load plugin and run body, and waits for them; records gtest
// failures for any child that fails, hangs or dies unexpectedly.
void run_world(const PluginUnderTest& plugin, int size, const WorldOptions& options,
               const std::function<void(RankEnv&)>& body);

// A world's body that checks the plugin takes the core's plan instead of planning again
// from the buffers: an allreduce whose planned in_place says "in place" although input and
// output differ (no core sends that; it only makes a second planning visible) must reduce
// the output and leave the input alone. Unplanned, the same op reduces the input.
void expect_plan_taken(RankEnv& r);

}  // namespace procgroup::plugin_harness
