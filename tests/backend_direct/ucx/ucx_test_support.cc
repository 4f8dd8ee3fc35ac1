// Ranks as processes for the ucx plugin's direct tests (see ucx_test_support.h).
#include "ucx_test_support.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "ucx_values.h"

namespace procgroup::ucx_test {
namespace {

thread_local std::string t_error;
void host_set_error(void*, const char* message) { t_error = message != nullptr ? message : ""; }

std::mutex g_log_mu;
std::vector<std::string> g_log;
void host_log(void*, int32_t level, const char* backend, const char* message) {
  if (level <= PG_LOG_WARN) std::fprintf(stderr, "[%s] %s\n", backend, message);
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.emplace_back(message);
}

// The plugin reduces with its own kernels: a call here is a test failure.
pg_status_t host_reduce(void*, void*, const void*, uint64_t, pg_dtype_t, pg_reduce_op_t) {
  host_set_error(nullptr, "test host: the ucx plugin should not call host->reduce");
  return PG_ERR_INTERNAL;
}
pg_status_t host_scale_down(void*, void*, uint64_t, pg_dtype_t, uint64_t) {
  host_set_error(nullptr, "test host: the ucx plugin should not call host->scale_down");
  return PG_ERR_INTERNAL;
}

std::string hex(const std::string& key) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : key) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

FileStore* self(void* ctx) { return static_cast<FileStore*>(ctx); }

}  // namespace

const pg_host_services_t* test_host() {
  static const pg_host_services_t host = {sizeof(pg_host_services_t),
                                          0,
                                          nullptr,
                                          &host_log,
                                          &host_set_error,
                                          &host_reduce,
                                          &host_scale_down};
  return &host;
}

std::string take_error() { return std::exchange(t_error, std::string()); }

std::vector<std::string> logged() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  return g_log;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// ---- FileStore ---------------------------------------------------------------------------

FileStore::FileStore(std::string dir, int64_t default_timeout_ms)
    : dir_(std::move(dir)), timeout_ms_(default_timeout_ms) {
  store_.struct_size = sizeof(store_);
  store_.ctx = this;
  store_.set = [](void* ctx, const char* key, const void* value, uint64_t length) {
    self(ctx)->put(key, std::string(static_cast<const char*>(value), length));
    return pg_status_t{PG_OK};
  };
  store_.get = [](void* ctx, const char* key, int64_t timeout_ms, void** value, uint64_t* length) {
    std::string v;
    if (!self(ctx)->fetch(key, timeout_ms < 0 ? self(ctx)->timeout_ms_ : timeout_ms, &v)) {
      host_set_error(nullptr, "test store: key never appeared");
      return pg_status_t{PG_ERR_TIMEOUT};
    }
    *value = std::malloc(v.size() + 1);
    std::memcpy(*value, v.data(), v.size());
    *length = v.size();
    return pg_status_t{PG_OK};
  };
  store_.free_value = [](void*, void* value) { std::free(value); };
  store_.add = [](void* ctx, const char* key, int64_t delta, int64_t* result) {
    const std::string lock_path = self(ctx)->dir_ + "/.lock";
    const int fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0) return pg_status_t{PG_ERR_STORE};
    ::flock(fd, LOCK_EX);
    std::string old;
    self(ctx)->fetch(key, 0, &old);
    *result = std::strtoll(old.c_str(), nullptr, 10) + delta;
    self(ctx)->put(key, std::to_string(*result));
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return pg_status_t{PG_OK};
  };
  store_.remove = [](void* ctx, const char* key) {
    std::filesystem::remove(self(ctx)->path(key));
    return pg_status_t{PG_OK};
  };
}

std::string FileStore::path(const std::string& key) const { return dir_ + "/k-" + hex(key); }

void FileStore::put(const std::string& key, const std::string& value) {
  static std::atomic<int> counter{0};
  const std::string tmp =
      dir_ + "/tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(value.data(), static_cast<std::streamsize>(value.size()));
  }
  std::filesystem::rename(tmp, path(key));
}

bool FileStore::fetch(const std::string& key, int64_t timeout_ms, std::string* value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    std::ifstream f(path(key), std::ios::binary);
    if (f) {
      std::ostringstream s;
      s << f.rdbuf();
      *value = s.str();
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// ---- Plugin, ops, works ------------------------------------------------------------------

Plugin::Plugin(uint32_t min_version, uint32_t max_version) {
  handle_ = dlopen(PG_UCX_PATH, RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    error_ = std::string("dlopen: ") + dlerror();
    return;
  }
  auto negotiate =
      reinterpret_cast<pg_backend_negotiate_fn>(dlsym(handle_, PG_BACKEND_NEGOTIATE_SYMBOL));
  if (negotiate == nullptr) {
    error_ = "no pg_backend_negotiate";
    return;
  }
  pg_backend_negotiate_in_t in = {sizeof(in), min_version, max_version, 0, test_host()};
  info_.struct_size = sizeof(info_);
  status_ = negotiate(&in, &info_);
  error_ = status_ == PG_OK ? "" : take_error();
}

Plugin::~Plugin() {
  if (handle_ != nullptr) dlclose(handle_);
}

pg_buffer_t cpu(void* data, uint64_t count, pg_dtype_t dtype) {
  return {sizeof(pg_buffer_t), dtype, data, count, PG_DEVICE_CPU, 0, nullptr};
}

pg_buffer_t absent() { return {sizeof(pg_buffer_t), PG_DTYPE_INVALID, nullptr, 0, 0, 0, nullptr}; }

pg_backend_op_t make_op(pg_op_t kind, pg_buffer_t input, pg_buffer_t output, OpArgs a) {
  pg_backend_op_t o{};
  o.struct_size = sizeof(o);
  o.op = kind;
  o.reduce_op = a.reduce_op;
  o.root = a.root;
  o.peer = a.peer;
  o.tag = a.tag;
  o.timeout_ms = a.timeout_ms;
  o.input = input;
  o.output = output;
  return o;
}

Work::Work(const pg_backend_ops_t* ops, pg_backend_work_t work, pg_status_t submit,
           std::string error)
    : ops_(ops), work_(work), submit_(submit), error_(std::move(error)) {}
Work::Work(Work&& other) noexcept { *this = std::move(other); }
Work& Work::operator=(Work&& other) noexcept {
  std::swap(ops_, other.ops_);
  std::swap(work_, other.work_);
  std::swap(submit_, other.submit_);
  std::swap(error_, other.error_);
  return *this;
}
Work::~Work() { release(); }

pg_status_t Work::capture(pg_status_t st) {
  std::string message = take_error();
  if (st != PG_OK && st != PG_PENDING) error_ = message;
  return st;
}
pg_status_t Work::wait(int64_t timeout_ms) {
  return work_ == nullptr ? submit_ : capture(ops_->work_wait(work_, timeout_ms));
}
pg_status_t Work::test() { return work_ == nullptr ? submit_ : capture(ops_->work_test(work_)); }
void Work::release() {
  if (work_ != nullptr) ops_->work_release(work_);
  work_ = nullptr;
}

// ---- Ranks -------------------------------------------------------------------------------

Work RankEnv::start(pg_backend_op_t o) {
  o.seq = ++seq;
  const pg_backend_op_fn fns[PG_OP_COUNT_] = {
      ops->allreduce,      ops->broadcast, ops->reduce,  ops->allgather,
      ops->reduce_scatter, ops->gather,    ops->scatter, ops->alltoall,
      ops->barrier,        ops->send,      ops->recv};
  pg_backend_work_t w = nullptr;
  take_error();
  const pg_status_t st = fns[o.op](group, &o, &w);
  std::string error = st == PG_OK ? "" : take_error();
  return Work(ops, st == PG_OK ? w : nullptr, st, std::move(error));
}

pg_status_t RankEnv::run(const pg_backend_op_t& o, std::string* error) {
  Work w = start(o);
  const pg_status_t st = w.wait();
  if (error != nullptr) *error = w.error();
  return st;
}

void RankEnv::expect(bool ok, const std::string& what, std::source_location where) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "%s:%u: [rank %d of %d] check failed: %s\n", where.file_name(), where.line(),
               rank, size, what.c_str());
}

void RankEnv::expect_status(pg_status_t got, pg_status_t want, const std::string& what,
                            std::source_location where) {
  expect(got == want,
         what + ": status " + status_name(got) + ", want " + status_name(want) + " " + take_error(),
         where);
}

pg_status_t create_group(const pg_backend_ops_t& ops, FileStore& store, int rank, int size,
                         int64_t timeout_ms, pg_backend_group_t* out) {
  pg_backend_group_config_t c{};
  c.struct_size = sizeof(c);
  c.rank = rank;
  c.size = size;
  c.local_rank = rank;
  c.local_size = size;
  c.device_type = -1;
  c.timeout_ms = timeout_ms;
  c.store = store.get();
  c.group_id = "world";
  c.master_addr = "127.0.0.1";
  return ops.group_create(&c, out);
}

namespace {

int child_main(int rank, int size, const std::string& dir, const WorldOptions& options,
               const std::function<void(RankEnv&)>& body) {
  for (const auto& [name, value] : options.env) setenv(name.c_str(), value.c_str(), 1);
  Plugin plugin;
  if (plugin.status() != PG_OK) {
    std::fprintf(stderr, "[rank %d] negotiate failed: %s\n", rank, plugin.error().c_str());
    return 2;
  }
  FileStore store(dir, options.timeout_ms);
  RankEnv env;
  env.rank = rank;
  env.size = size;
  env.ops = &plugin.ops();
  env.store = &store;
  if (options.create_group) {
    const pg_status_t st =
        create_group(plugin.ops(), store, rank, size, options.timeout_ms, &env.group);
    if (st != PG_OK) {
      std::fprintf(stderr, "[rank %d] group_create: %d %s\n", rank, st, take_error().c_str());
      return 3;
    }
  }
  body(env);
  if (env.group != nullptr) {
    env.expect_status(plugin.ops().group_destroy(env.group), PG_OK, "group_destroy");
  }
  return env.failures == 0 ? 0 : 1;
}

}  // namespace

void run_world(int size, const WorldOptions& options, const std::function<void(RankEnv&)>& body) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "pg-ucx-test-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 4;
      try {
        rc = child_main(r, size, dir, options, body);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] exception: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.limit_s);
  std::vector<int> status(size, -1);
  for (int done = 0; done < size;) {
    for (int r = 0; r < size; ++r) {
      int st = 0;
      if (status[r] == -1 && waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = st;
        ++done;
      }
    }
    if (done < size && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < size; ++r) {
        if (status[r] != -1) continue;
        ADD_FAILURE() << "rank " << r << " hung; killing it";
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &status[r], 0);
        ++done;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < size; ++r) {
    const bool killed =
        std::find(options.killed.begin(), options.killed.end(), r) != options.killed.end();
    if (killed) {
      EXPECT_TRUE(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL)
          << "rank " << r << " was meant to die of SIGKILL";
    } else {
      EXPECT_TRUE(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0)
          << "rank " << r << " failed: "
          << (WIFEXITED(status[r]) ? "exit code " + std::to_string(WEXITSTATUS(status[r]))
                                   : "signal " + std::to_string(WTERMSIG(status[r])));
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace procgroup::ucx_test
