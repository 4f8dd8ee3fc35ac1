// gloo_test_support.h — drives the gloo plugin's function table with ranks as real
// processes: fork N children; each dlopens the plugin, negotiates with a test-local host
// (set_error into a thread-local string; scale_down for every dtype), and creates its
// group through a file store in a directory the ranks share.
//
//   run_world(3, {}, [](RankEnv& r) {
//     float x[4] = {1, 2, 3, 4};
//     pg_buffer_t b = cpu(x, 4, PG_DTYPE_F32);
//     r.expect(r.run(make_op(PG_OP_ALLREDUCE, b, b)) == PG_OK, "allreduce");
//   });                                 // gtest failure unless every child exits cleanly
//
// Children cannot use gtest assertions (their failures would stay in the child), so they
// report through RankEnv::expect, which prints the failure and sets the exit code.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <source_location>
#include <string>
#include <vector>

#include "procgroup/procgroup_backend.h"

namespace procgroup::gloo_test {

// ---- Host services and numeric references --------------------------------------------

const pg_host_services_t* test_host();
// This thread's last set_error message, and forgets it.
std::string take_error();
// Every line the plugin logged in this process, any level.
std::vector<std::string> logged();

// IEEE half / bfloat16 encodings, written independently of the plugin: round to nearest
// even, subnormals kept, overflow to infinity.
uint16_t to_f16(double value);
uint16_t to_bf16(double value);
double from_f16(uint16_t bits);
double from_bf16(uint16_t bits);

// What the test host's scale_down does to one element of dtype (stored as a double).
double host_scale(double value, pg_dtype_t dtype, uint64_t divisor);

// ---- A file store shared by the ranks --------------------------------------------------

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

// ---- The plugin and ops -----------------------------------------------------------------

class Plugin {
 public:
  Plugin(uint32_t min_version = 1, uint32_t max_version = 1);
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

// An owned work handle (released on destruction) or the status its submission failed with.
class Work {
 public:
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

// ---- Ranks as processes ----------------------------------------------------------------

struct RankEnv {
  int rank = 0;
  int size = 0;
  const pg_backend_ops_t* ops = nullptr;
  pg_backend_group_t group = nullptr;
  FileStore* store = nullptr;
  uint64_t seq = 0;
  int failures = 0;

  // Issues o (numbered like the core: seq from 1) and returns its work.
  Work start(pg_backend_op_t o);
  // start + wait; *error gets the message of a failure.
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
  bool create_group = true;  // false: the body creates (or not) its group itself
  std::string master_addr = "127.0.0.1";
  int limit_s = 90;  // the children are killed after this
};

// Forks size children running body and waits for them; records gtest failures for any
// child that fails, hangs or dies unexpectedly.
void run_world(int size, const WorldOptions& options, const std::function<void(RankEnv&)>& body);

// Creates rank's group of size through store (for bodies that do it themselves).
pg_status_t create_group(const pg_backend_ops_t& ops, FileStore& store, int rank, int size,
                         int64_t timeout_ms, pg_backend_group_t* out,
                         const char* master_addr = "127.0.0.1");

}  // namespace procgroup::gloo_test
