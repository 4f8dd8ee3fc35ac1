// direct_harness.h — drives a backend plugin's function table directly, without
// libprocgroup: dlopen + pg_backend_negotiate with a small host of our own, an in-memory
// rendezvous store, and ranks as threads. It knows only procgroup_backend.h, so it measures
// the plugin alone (the baseline for the core's per-call overhead) and works for any plugin
// whose ranks can be threads.
//
//   direct::Plugin plugin(PG_LOOPBACK_PATH);
//   direct::World world(plugin, 4);                   // group_create on 4 threads
//   world.run([&](int rank) {
//     float x[8] = {...};
//     pg_buffer_t b = direct::cpu(x, 8, PG_DTYPE_F32);
//     EXPECT_EQ(world.start(rank, direct::op(PG_OP_ALLREDUCE, b, b)).wait(), PG_OK);
//   });
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "direct_host.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::direct {

// ---- Plugin ------------------------------------------------------------------------------

// A dlopen'd plugin, negotiated with test_host(). Unloaded on destruction, so every group
// it created must be destroyed first.
class Plugin {
 public:
  explicit Plugin(const std::string& path, uint32_t min_version = 1, uint32_t max_version = 1) {
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw std::runtime_error("dlopen " + path + ": " + dlerror());
    negotiate_ =
        reinterpret_cast<pg_backend_negotiate_fn>(dlsym(handle_, PG_BACKEND_NEGOTIATE_SYMBOL));
    if (negotiate_ == nullptr) throw std::runtime_error(path + " lacks pg_backend_negotiate");
    pg_backend_negotiate_in_t in = {sizeof(in), min_version, max_version, 0, test_host()};
    info_.struct_size = sizeof(info_);
    status_ = negotiate_(&in, &info_);
    error_ = status_ == PG_OK ? "" : take_error();
  }
  ~Plugin() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  pg_status_t status() const { return status_; }  // of negotiate
  const std::string& error() const { return error_; }
  const pg_backend_negotiate_out_t& info() const { return info_; }
  const pg_backend_ops_t& ops() const { return *info_.ops; }
  pg_backend_negotiate_fn negotiate() const { return negotiate_; }

 private:
  void* handle_ = nullptr;
  pg_backend_negotiate_fn negotiate_ = nullptr;
  pg_backend_negotiate_out_t info_{};
  pg_status_t status_ = PG_ERR_INTERNAL;
  std::string error_;
};

// The table entry for an operation (NULL when not native).
inline pg_backend_op_fn entry(const pg_backend_ops_t& ops, pg_op_t op) {
  switch (op) {
    case PG_OP_ALLREDUCE: return ops.allreduce;
    case PG_OP_BROADCAST: return ops.broadcast;
    case PG_OP_REDUCE: return ops.reduce;
    case PG_OP_ALLGATHER: return ops.allgather;
    case PG_OP_REDUCE_SCATTER: return ops.reduce_scatter;
    case PG_OP_GATHER: return ops.gather;
    case PG_OP_SCATTER: return ops.scatter;
    case PG_OP_ALLTOALL: return ops.alltoall;
    case PG_OP_BARRIER: return ops.barrier;
    case PG_OP_SEND: return ops.send;
    case PG_OP_RECV: return ops.recv;
    default: return nullptr;
  }
}

// ---- Operations and works ------------------------------------------------------------

inline pg_buffer_t cpu(void* data, uint64_t count, pg_dtype_t dtype) {
  return {sizeof(pg_buffer_t), dtype, data, count, PG_DEVICE_CPU, 0, nullptr};
}
inline pg_buffer_t absent() {
  return {sizeof(pg_buffer_t), PG_DTYPE_INVALID, nullptr, 0, 0, 0, nullptr};
}

struct OpArgs {
  int32_t root = 0;
  pg_reduce_op_t reduce_op = PG_REDUCE_SUM;
  int32_t peer = 0;
  uint64_t tag = 0;
  int64_t timeout_ms = 0;  // 0: the group's
  uint64_t seq = 0;        // 0: World::start numbers it
};

// An op as a core without planning sends it: struct_size ends before block_count, so the
// plugin plans (and validates) it with kit::plan_op. kit::fill_plan makes it a planned op.
inline constexpr uint32_t kUnplannedOpSize = offsetof(pg_backend_op_t, block_count);

inline pg_backend_op_t op(pg_op_t kind, pg_buffer_t input, pg_buffer_t output, OpArgs a = {}) {
  pg_backend_op_t o{};
  o.struct_size = kUnplannedOpSize;
  o.op = kind;
  o.reduce_op = a.reduce_op;
  o.root = a.root;
  o.peer = a.peer;
  o.tag = a.tag;
  o.seq = a.seq;
  o.timeout_ms = a.timeout_ms;
  o.input = input;
  o.output = output;
  return o;
}

// An owned work handle (released on destruction), or the status its submission failed with.
class Work {
 public:
  Work() = default;
  Work(const pg_backend_ops_t* ops, pg_backend_work_t work, pg_status_t submit, std::string error)
      : ops_(ops), work_(work), submit_(submit), error_(std::move(error)) {}
  Work(Work&& o) noexcept { *this = std::move(o); }
  Work& operator=(Work&& o) noexcept {
    std::swap(ops_, o.ops_);
    std::swap(work_, o.work_);
    std::swap(submit_, o.submit_);
    std::swap(error_, o.error_);
    return *this;
  }
  ~Work() { release(); }

  pg_status_t submit_status() const { return submit_; }
  // The submission's status when it failed, else the work's (error() gets its message).
  pg_status_t wait(int64_t timeout_ms = -1) {
    if (work_ == nullptr) return submit_;
    return capture(ops_->work_wait(work_, timeout_ms));
  }
  pg_status_t test() {
    if (work_ == nullptr) return submit_;
    return capture(ops_->work_test(work_));
  }
  const std::string& error() const { return error_; }
  void release() {
    if (work_ != nullptr) ops_->work_release(work_);
    work_ = nullptr;
  }

 private:
  pg_status_t capture(pg_status_t st) {
    if (st != PG_OK && st != PG_PENDING) error_ = take_error();
    return st;
  }
  const pg_backend_ops_t* ops_ = nullptr;
  pg_backend_work_t work_ = nullptr;
  pg_status_t submit_ = PG_ERR_INTERNAL;
  std::string error_;
};

// Calls an entry directly (no World): for argument checks and one-off calls.
inline Work start(const pg_backend_ops_t& ops, pg_backend_group_t group, const pg_backend_op_t& o) {
  pg_backend_work_t w = nullptr;
  pg_status_t st = entry(ops, o.op)(group, &o, &w);
  std::string err = st == PG_OK ? "" : take_error();
  return Work(&ops, st == PG_OK ? w : nullptr, st, std::move(err));
}

// ---- A world of ranks as threads -----------------------------------------------------

struct WorldOptions {
  int64_t timeout_ms = 30000;
  std::string group_id = {};                // empty: a fresh unique one
  std::shared_ptr<MemoryStore> store = {};  // null: a private one
  std::vector<int> ranks = {};              // which ranks call group_create; empty: all
};

// Runs fn(rank) on one thread per rank and joins them all.
inline void run_ranks(int size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

class World {
 public:
  World(const Plugin& plugin, int size, WorldOptions opts = {})
      : ops_(&plugin.ops()),
        size_(size),
        groups_(size),
        seq_(size, 0),
        status_(size, PG_PENDING),
        errors_(size) {
    static std::atomic<int> counter{0};
    id_ = opts.group_id.empty() ? "direct" + std::to_string(counter++) : opts.group_id;
    auto base = opts.store ? opts.store : std::make_shared<MemoryStore>();
    store_ = std::make_unique<ScopedStore>(base, "pg/" + id_ + "/", opts.timeout_ms);
    std::vector<int> ranks = opts.ranks;
    if (ranks.empty()) {
      for (int r = 0; r < size; ++r) ranks.push_back(r);
    }
    std::vector<std::thread> threads;
    for (int r : ranks) {
      threads.emplace_back([this, r, &opts] {
        pg_backend_group_config_t c{};
        c.struct_size = sizeof(c);
        c.rank = r;
        c.size = size_;
        c.local_rank = r;
        c.local_size = size_;
        c.device_type = -1;
        c.timeout_ms = opts.timeout_ms;
        c.store = store_->get();
        c.group_id = id_.c_str();
        c.master_addr = "127.0.0.1";
        status_[r] = ops_->group_create(&c, &groups_[r]);
        if (status_[r] != PG_OK) errors_[r] = take_error();
      });
    }
    for (auto& t : threads) t.join();
  }
  ~World() {
    for (int r = 0; r < size_; ++r) destroy(r);
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int size() const { return size_; }
  const pg_backend_ops_t& ops() const { return *ops_; }
  pg_backend_group_t group(int rank) const { return groups_[rank]; }
  pg_status_t create_status(int rank) const { return status_[rank]; }
  const std::string& create_error(int rank) const { return errors_[rank]; }
  bool ok() const {
    return std::all_of(status_.begin(), status_.end(), [](pg_status_t s) { return s == PG_OK; });
  }
  ScopedStore& store() { return *store_; }
  const std::string& id() const { return id_; }

  void run(const std::function<void(int)>& fn) { run_ranks(size_, fn); }

  // Starts an operation on rank's group, numbering it like the core (seq from 1 per rank).
  Work start(int rank, pg_backend_op_t o) {
    uint64_t seq = ++seq_[rank];
    if (o.seq == 0) o.seq = seq;
    return direct::start(*ops_, groups_[rank], o);
  }
  // start + wait.
  pg_status_t call(int rank, const pg_backend_op_t& o, std::string* error = nullptr) {
    Work w = start(rank, o);
    pg_status_t st = w.wait();
    if (error != nullptr) *error = w.error();
    return st;
  }

  pg_status_t destroy(int rank) {
    if (groups_[rank] == nullptr) return PG_OK;
    pg_status_t st = ops_->group_destroy(groups_[rank]);
    groups_[rank] = nullptr;
    return st;
  }

 private:
  const pg_backend_ops_t* ops_;
  int size_;
  std::string id_;
  std::unique_ptr<ScopedStore> store_;
  std::vector<pg_backend_group_t> groups_;
  std::vector<uint64_t> seq_;
  std::vector<pg_status_t> status_;
  std::vector<std::string> errors_;
};

}  // namespace procgroup::direct
