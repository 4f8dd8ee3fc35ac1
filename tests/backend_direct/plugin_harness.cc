// Ranks as forked processes for a backend plugin's direct tests (see plugin_harness.h).
#include "plugin_harness.h"

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
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::plugin_harness {
namespace {

std::mutex g_log_mu;
std::vector<std::string> g_log;

void host_log(void* ctx, int32_t level, const char* backend, const char* message) {
  direct::internal::host_log(ctx, level, backend, message);
  std::lock_guard<std::mutex> lock(g_log_mu);
  g_log.emplace_back(message);
}

std::string hex(const std::string& key) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : key) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

FileStore* self(void* ctx) { return static_cast<FileStore*>(ctx); }

}  // namespace

const char* status_name(pg_status_t s) {
  static constexpr const char* kNames[] = {"PG_OK",
                                           "PG_PENDING",
                                           "PG_ERR_INVALID_ARGUMENT",
                                           "PG_ERR_UNSUPPORTED",
                                           "PG_ERR_TIMEOUT",
                                           "PG_ERR_PEER_LOST",
                                           "PG_ERR_ABORTED",
                                           "PG_ERR_MISMATCH",
                                           "PG_ERR_BACKEND_NOT_FOUND",
                                           "PG_ERR_ABI_MISMATCH",
                                           "PG_ERR_BACKEND",
                                           "PG_ERR_STORE",
                                           "PG_ERR_AUTH",
                                           "PG_ERR_OUT_OF_MEMORY",
                                           "PG_ERR_CONFIG",
                                           "PG_ERR_INTERNAL"};
  return s >= 0 && s <= PG_ERR_INTERNAL ? kNames[s] : "unknown status";
}

// ---- Host services ------------------------------------------------------------------------

pg_host_services_t make_host(HostReduceFn reduce, HostScaleDownFn scale_down) {
  pg_host_services_t host{};
  host.struct_size = sizeof(host);
  host.log = &host_log;
  host.set_error = &direct::internal::host_set_error;
  host.reduce = reduce;
  host.scale_down = scale_down;
  return host;
}

std::vector<std::string> logged() {
  std::lock_guard<std::mutex> lock(g_log_mu);
  return g_log;
}

// ---- Plugin -------------------------------------------------------------------------------

Plugin::Plugin(const PluginUnderTest& plugin, uint32_t min_version, uint32_t max_version) {
  handle_ = dlopen(plugin.path, RTLD_NOW | RTLD_LOCAL);
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
  pg_backend_negotiate_in_t in = {sizeof(in), min_version, max_version, 0, plugin.host};
  info_.struct_size = sizeof(info_);
  status_ = negotiate(&in, &info_);
  error_ = status_ == PG_OK ? "" : take_error();
}

Plugin::~Plugin() {
  if (handle_ != nullptr) dlclose(handle_);
}

// ---- FileStore ----------------------------------------------------------------------------

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
      direct::internal::host_set_error(nullptr, "test store: key never appeared");
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

pg_status_t create_group(const pg_backend_ops_t& ops, FileStore& store, int rank, int size,
                         int64_t timeout_ms, pg_backend_group_t* out, const char* master_addr) {
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
  c.master_addr = master_addr;
  return ops.group_create(&c, out);
}

// ---- Ranks --------------------------------------------------------------------------------

Work RankEnv::start(pg_backend_op_t o) {
  o.seq = ++seq;
  take_error();  // a message left by an earlier call must not pass for this one's
  return direct::start(*ops, group, o);
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
  // Reads the last error without taking it: a test may still take_error() after this.
  expect(got == want,
         what + ": status " + status_name(got) + ", want " + status_name(want) + " " +
             direct::t_last_error,
         where);
}

namespace {

int child_main(const PluginUnderTest& target, int rank, int size, const std::string& dir,
               const WorldOptions& options, const std::function<void(RankEnv&)>& body) {
  for (const auto& [name, value] : options.env) setenv(name.c_str(), value.c_str(), 1);
  Plugin plugin(target);
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
    const pg_status_t st = create_group(plugin.ops(), store, rank, size, options.timeout_ms,
                                        &env.group, options.master_addr.c_str());
    if (st != PG_OK) {
      std::fprintf(stderr, "[rank %d] group_create: %s %s\n", rank, status_name(st),
                   take_error().c_str());
      return 3;
    }
  }
  body(env);
  if (env.group != nullptr) {
    env.expect_status(plugin.ops().group_destroy(env.group), PG_OK, "group_destroy");
  }
  return env.failures == 0 ? 0 : 1;
}

// Waits for every child, killing those still running at deadline; their wait statuses.
std::vector<int> reap(const std::vector<pid_t>& pids,
                      std::chrono::steady_clock::time_point deadline) {
  const int size = static_cast<int>(pids.size());
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
  return status;
}

}  // namespace

void run_world(const PluginUnderTest& plugin, int size, const WorldOptions& options,
               const std::function<void(RankEnv&)>& body) {
  const std::string pattern = std::string("pg-") + plugin.name + "-test-XXXXXX";
  std::string dir = (std::filesystem::temp_directory_path() / pattern).string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::fflush(nullptr);  // or the children would print what is buffered here again
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 4;
      try {
        rc = child_main(plugin, r, size, dir, options, body);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] exception: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  const int limit_s = options.limit_s > 0 ? options.limit_s : plugin.limit_s;
  const std::vector<int> status =
      reap(pids, std::chrono::steady_clock::now() + std::chrono::seconds(limit_s));
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

void expect_plan_taken(RankEnv& r) {
  const float mine = static_cast<float>(r.rank + 1);
  const int ranks_sum = r.size * (r.size + 1) / 2;  // of every rank's `mine`
  const float sum = static_cast<float>(ranks_sum);
  std::vector<float> in(5, mine), out(5, 10 * mine);
  pg_backend_op_t o =
      make_op(PG_OP_ALLREDUCE, cpu(in.data(), 5, PG_DTYPE_F32), cpu(out.data(), 5, PG_DTYPE_F32));
  r.expect_status(r.run(o), PG_OK, "unplanned allreduce");
  r.expect(out == std::vector<float>(5, sum), "unplanned, the plugin reduced the input");
  std::fill(out.begin(), out.end(), 10 * mine);
  const kit::Status filled = kit::fill_plan(&o, r.rank, r.size);
  r.expect(filled.ok() && o.in_place == 0, "kit::fill_plan: " + filled.message);
  o.in_place = 1;
  r.expect_status(r.run(o), PG_OK, "planned allreduce");
  r.expect(out == std::vector<float>(5, 10 * sum), "planned in place, it reduced the output");
  r.expect(in == std::vector<float>(5, mine), "planned in place, it left the input alone");
}

}  // namespace procgroup::plugin_harness
