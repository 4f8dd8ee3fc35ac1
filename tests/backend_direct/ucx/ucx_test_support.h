// ucx_test_support.h — drives the ucx plugin's function table with ranks as forked
// processes: each child dlopens the plugin, negotiates with a test-local host and creates
// its group through a file store in a directory the ranks share (no libprocgroup).
//
//   run_world(3, {}, [](RankEnv& r) {
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

#include "procgroup/procgroup_backend.h"

namespace procgroup::ucx_test {

// ---- Host -------------------------------------------------------------------------------

const pg_host_services_t* test_host();
std::string take_error();           // this thread's last set_error message, forgotten
std::vector<std::string> logged();  // every line the plugin logged in this process

// ---- Store shared by the ranks ------------------------------------------------------------

class FileStore {
 public:
  FileStore(std::string dir, int64_t default_timeout_ms);
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;
  const pg_host_store_t* get() const { return &store_; }
  void put(const std::string& key, const std::string& value);
  bool fetch(const std::string& key, int64_t timeout_ms, std::string* value);

 private:
  std::string path(const std::string& key) const;
  std::string dir_;
  int64_t timeout_ms_;
  pg_host_store_t store_{};
};

// ---- Plugin, ops, works ------------------------------------------------------------------

class Plugin {
 public:
  explicit Plugin(uint32_t min_version = 1, uint32_t max_version = 1);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;
  pg_status_t status() const { return status_; }
  const std::string& error() const { return error_; }
  const pg_backend_negotiate_out_t& info() const { return info_; }
  const pg_backend_ops_t& ops() const { return *info_.ops; }

 private:
  void* handle_ = nullptr;
  pg_backend_negotiate_out_t info_{};
  pg_status_t status_ = PG_ERR_INTERNAL;
  std::string error_;
};

pg_buffer_t cpu(void* data, uint64_t count, pg_dtype_t dtype);
pg_buffer_t absent();

struct OpArgs {
  int32_t root = 0;
  pg_reduce_op_t reduce_op = PG_REDUCE_SUM;
  int32_t peer = 0;
  uint64_t tag = 0;
  int64_t timeout_ms = 0;
};
pg_backend_op_t make_op(pg_op_t kind, pg_buffer_t input, pg_buffer_t output, OpArgs a = {});

// An owned work handle, or the status its submission failed with.
class Work {
 public:
  Work() = default;
  Work(const pg_backend_ops_t* ops, pg_backend_work_t work, pg_status_t submit, std::string error);
  Work(Work&& other) noexcept;
  Work& operator=(Work&& other) noexcept;
  ~Work();
  pg_status_t submit_status() const { return submit_; }
  pg_status_t wait(int64_t timeout_ms = -1);
  pg_status_t test();
  const std::string& error() const { return error_; }
  void release();

 private:
  pg_status_t capture(pg_status_t st);
  const pg_backend_ops_t* ops_ = nullptr;
  pg_backend_work_t work_ = nullptr;
  pg_status_t submit_ = PG_ERR_INTERNAL;
  std::string error_;
};

// ---- Ranks as processes --------------------------------------------------------------------

struct RankEnv {
  int rank = 0;
  int size = 0;
  const pg_backend_ops_t* ops = nullptr;
  pg_backend_group_t group = nullptr;
  FileStore* store = nullptr;
  uint64_t seq = 0;
  int failures = 0;

  Work start(pg_backend_op_t o);  // numbered like the core: seq from 1
  pg_status_t run(const pg_backend_op_t& o, std::string* error = nullptr);
  void expect(bool ok, const std::string& what,
              std::source_location where = std::source_location::current());
  void expect_status(pg_status_t got, pg_status_t want, const std::string& what,
                     std::source_location where = std::source_location::current());
};

struct WorldOptions {
  int64_t timeout_ms = 20000;
  std::vector<std::pair<std::string, std::string>> env;  // setenv in every child
  std::vector<int> killed;                               // ranks expected to die of SIGKILL
  bool create_group = true;                              // false: the body creates its group itself
  int limit_s = 100;  // children still running then are killed (a failure)
};

void run_world(int size, const WorldOptions& options, const std::function<void(RankEnv&)>& body);

pg_status_t create_group(const pg_backend_ops_t& ops, FileStore& store, int rank, int size,
                         int64_t timeout_ms, pg_backend_group_t* out);

// CPU time this process has used, in seconds (every thread).
double process_cpu_seconds();

}  // namespace procgroup::ucx_test
