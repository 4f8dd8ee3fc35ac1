// Ranks as processes for the gloo plugin's direct tests (see gloo_test_support.h).
#include "gloo_test_support.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <utility>

namespace procgroup::gloo_test {

// ---- Plugin, ops, works ----------------------------------------------------------------

Plugin::Plugin(uint32_t min_version, uint32_t max_version) {
  handle_ = dlopen(PG_GLOO_PATH, RTLD_NOW | RTLD_LOCAL);
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

// ---- Ranks -----------------------------------------------------------------------------

Work RankEnv::start(pg_backend_op_t o) {
  o.seq = ++seq;
  pg_backend_op_fn fns[PG_OP_COUNT_] = {
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
  expect(got == want, what + ": status " + std::to_string(got) + ", want " + std::to_string(want),
         where);
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
    const pg_status_t st = create_group(plugin.ops(), store, rank, size, options.timeout_ms,
                                        &env.group, options.master_addr.c_str());
    if (st != PG_OK) {
      std::fprintf(stderr, "[rank %d] group_create: %d %s\n", rank, st, take_error().c_str());
      return 3;
    }
  }
  body(env);
  if (env.group != nullptr)
    env.expect_status(plugin.ops().group_destroy(env.group), PG_OK, "group_destroy");
  return env.failures == 0 ? 0 : 1;
}

}  // namespace

void run_world(int size, const WorldOptions& options, const std::function<void(RankEnv&)>& body) {
  char tmpl[] = "/tmp/pg-gloo-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
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
      if (status[r] != -1) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        status[r] = st;
        ++done;
      }
    }
    if (done < size && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < size; ++r) {
        if (status[r] == -1) {
          ADD_FAILURE() << "rank " << r << " hung; killing it";
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &status[r], 0);
          ++done;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < size; ++r) {
    const bool expect_kill =
        std::find(options.killed.begin(), options.killed.end(), r) != options.killed.end();
    if (expect_kill) {
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

}  // namespace procgroup::gloo_test
