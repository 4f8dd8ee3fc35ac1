// pg_backend_negotiate and the function table: the plugin's only contact with the core.
// Every entry goes through guard(), so no C++ exception crosses the C boundary and every
// error status is preceded by host->set_error on the calling thread.
//
// Built twice: "loopback" (every operation native, and group_split) and, with
// PG_LOOPBACK_P2P_ONLY, "loopback_p2p" (send and recv only; the core emulates every
// collective over them and makes subgroups with group_create).
#include <cstddef>
#include <exception>
#include <new>
#include <string>

#include "loopback_group.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::loopback {
namespace {

#if defined(PG_LOOPBACK_P2P_ONLY) && PG_LOOPBACK_P2P_ONLY
constexpr bool kP2pOnly = true;
constexpr const char* kName = "loopback_p2p";
constexpr const char* kDescription =
    "in-process reference backend (ranks are threads of one process), send/recv only";
#else
constexpr bool kP2pOnly = false;
constexpr const char* kName = "loopback";
constexpr const char* kDescription =
    "in-process reference backend (ranks are threads of one process)";
#endif
constexpr uint32_t kInterfaceVersion = 1;

template <class Body>
pg_status_t guard(const pg_host_services_t* host, Body&& body) noexcept {
  try {
    Outcome outcome = body();
    if (!outcome.ok()) report_error(host, outcome.message);
    return outcome.status;
  } catch (const std::bad_alloc&) {
    report_error(host, std::string(kName) + ": out of memory");
    return PG_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    report_error(host, std::string(kName) + ": internal error: " + e.what());
    return PG_ERR_INTERNAL;
  } catch (...) {
    report_error(host, std::string(kName) + ": internal error (unknown exception)");
    return PG_ERR_INTERNAL;
  }
}

RankGroup* as_rank(pg_backend_group_t group) { return reinterpret_cast<RankGroup*>(group); }
Work* as_work(pg_backend_work_t work) { return reinterpret_cast<Work*>(work); }

Outcome null_argument(const char* what) {
  return {PG_ERR_INVALID_ARGUMENT, std::string(kName) + ": " + what + " is NULL"};
}

pg_status_t group_create(const pg_backend_group_config_t* config, pg_backend_group_t* out) {
  const pg_host_services_t* host = plugin_host();
  return guard(host, [&]() -> Outcome {
    if (host == nullptr) {
      return {PG_ERR_INTERNAL, std::string(kName) + ": group_create before pg_backend_negotiate"};
    }
    if (out == nullptr) return null_argument("group_create's out");
    *out = nullptr;
    RankGroup* rank = nullptr;
    Outcome created = RankGroup::create(config, host, &rank);
    if (created.ok()) *out = reinterpret_cast<pg_backend_group_t>(rank);
    return created;
  });
}

pg_status_t group_split(pg_backend_group_t parent, int32_t color, int32_t key,
                        const pg_backend_group_config_t* config, pg_backend_group_t* out) {
  if (parent == nullptr) return guard(plugin_host(), [] { return null_argument("parent"); });
  return guard(as_rank(parent)->host(), [&]() -> Outcome {
    if (out == nullptr) return null_argument("group_split's out");
    *out = nullptr;
    RankGroup* child = nullptr;
    Outcome made = as_rank(parent)->split(color, key, config, &child);
    if (made.ok() && child != nullptr) *out = reinterpret_cast<pg_backend_group_t>(child);
    return made;
  });
}

pg_status_t group_destroy(pg_backend_group_t group) {
  if (group == nullptr) return guard(plugin_host(), [] { return null_argument("group"); });
  return guard(as_rank(group)->host(), [&]() -> Outcome {
    as_rank(group)->destroy();
    delete as_rank(group);
    return {};
  });
}

pg_status_t group_abort(pg_backend_group_t group) {
  if (group == nullptr) return guard(plugin_host(), [] { return null_argument("group"); });
  return guard(as_rank(group)->host(), [&]() -> Outcome {
    as_rank(group)->abort();
    return {};
  });
}

pg_status_t work_test(pg_backend_work_t work) {
  if (work == nullptr) return guard(plugin_host(), [] { return null_argument("work"); });
  try {
    return as_work(work)->test();
  } catch (...) {
    return guard(plugin_host(), [] { return Outcome{PG_ERR_INTERNAL, "work_test failed"}; });
  }
}

pg_status_t work_wait(pg_backend_work_t work, int64_t timeout_ms) {
  if (work == nullptr) return guard(plugin_host(), [] { return null_argument("work"); });
  try {
    return as_work(work)->wait(timeout_ms);
  } catch (...) {
    return guard(plugin_host(), [] { return Outcome{PG_ERR_INTERNAL, "work_wait failed"}; });
  }
}

void work_release(pg_backend_work_t work) {
  if (work != nullptr) as_work(work)->unref();
}

// One entry per operation kind; they differ only in which submit they call.
template <pg_op_t kOp>
pg_status_t submit(pg_backend_group_t group, const pg_backend_op_t* op, pg_backend_work_t* work) {
  if (group == nullptr) return guard(plugin_host(), [] { return null_argument("group"); });
  return guard(as_rank(group)->host(), [&]() -> Outcome {
    if (op == nullptr) return null_argument("op");
    if (work == nullptr) return null_argument("work");
    *work = nullptr;
    if (op->struct_size < sizeof(pg_backend_op_t)) {
      return {PG_ERR_INVALID_ARGUMENT, std::string(op_name(kOp)) + ": op.struct_size " +
                                           std::to_string(op->struct_size) + " is too small"};
    }
    if (op->op != kOp) {
      return {PG_ERR_INVALID_ARGUMENT,
              std::string(op_name(kOp)) + " entry called with op " + std::to_string(op->op)};
    }
    if (kOp == PG_OP_SEND) return as_rank(group)->submit_send(*op, work);
    if (kOp == PG_OP_RECV) return as_rank(group)->submit_recv(*op, work);
    return as_rank(group)->submit_collective(*op, work);
  });
}

template <pg_op_t kOp>
constexpr pg_backend_op_fn collective() {
  return kP2pOnly ? nullptr : &submit<kOp>;
}

constexpr pg_backend_ops_t kOps = {
    sizeof(pg_backend_ops_t),
    0,
    &group_create,
    &group_destroy,
    &group_abort,
    &work_test,
    &work_wait,
    &work_release,
    collective<PG_OP_ALLREDUCE>(),
    collective<PG_OP_BROADCAST>(),
    collective<PG_OP_REDUCE>(),
    collective<PG_OP_ALLGATHER>(),
    collective<PG_OP_REDUCE_SCATTER>(),
    collective<PG_OP_GATHER>(),
    collective<PG_OP_SCATTER>(),
    collective<PG_OP_ALLTOALL>(),
    collective<PG_OP_BARRIER>(),
    &submit<PG_OP_SEND>,
    &submit<PG_OP_RECV>,
    // loopback_p2p leaves it out, so its subgroups keep taking the core's group_create path.
    kP2pOnly ? nullptr : &group_split,
    nullptr,  // work_on_complete: the core waits for works on its own thread
};

constexpr uint32_t kP2pOps = 1u << PG_OP_SEND | 1u << PG_OP_RECV;
constexpr uint32_t kAllOps = (1u << PG_OP_COUNT_) - 1;
constexpr uint32_t kAllDtypes = ((1u << PG_DTYPE_COUNT_) - 1) & ~(1u << PG_DTYPE_INVALID);
constexpr uint32_t kAllReduceOps = (1u << PG_REDUCE_COUNT_) - 1;

Outcome negotiate(const pg_backend_negotiate_in_t* in, pg_backend_negotiate_out_t* out) {
  const std::string name(kName);
  if (in->min_version > kInterfaceVersion || in->max_version < kInterfaceVersion) {
    return {PG_ERR_ABI_MISMATCH, name + " speaks backend interface version 1; the core offers " +
                                     std::to_string(in->min_version) + ".." +
                                     std::to_string(in->max_version)};
  }
  const pg_host_services_t* host = in->host;
  if (host->struct_size < sizeof(pg_host_services_t) || host->reduce == nullptr ||
      host->scale_down == nullptr) {
    return {PG_ERR_ABI_MISMATCH, name + " needs the host's reduce and scale_down services"};
  }
  if (out->struct_size < sizeof(pg_backend_negotiate_out_t)) {
    return {PG_ERR_ABI_MISMATCH, name + ": negotiate output struct_size " +
                                     std::to_string(out->struct_size) + " is too small"};
  }
  // Only the version-1 fields: a larger out (a newer core) keeps its defaults beyond them.
  out->version = kInterfaceVersion;
  out->name = kName;
  out->description = kDescription;
  out->native_ops = kP2pOnly ? kP2pOps : kAllOps;
  out->native_dtypes = kAllDtypes;
  out->native_reduce_ops = kAllReduceOps;
  out->devices = 1u << PG_DEVICE_CPU;
  out->ops = &kOps;
  set_plugin_host(host);
  return {};
}

}  // namespace
}  // namespace procgroup::loopback

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  using namespace procgroup::loopback;
  // Until in->host is known to work there is nobody to tell why we refuse.
  if (in == nullptr) return PG_ERR_INVALID_ARGUMENT;
  // A core whose input struct does not even reach the host pointer speaks another ABI.
  if (in->struct_size < sizeof(pg_backend_negotiate_in_t)) return PG_ERR_ABI_MISMATCH;
  const pg_host_services_t* host = in->host;
  if (host == nullptr || host->struct_size < offsetof(pg_host_services_t, reduce) ||
      host->set_error == nullptr) {
    return PG_ERR_INVALID_ARGUMENT;
  }
  return guard(host, [&]() -> Outcome {
    if (out == nullptr) return null_argument("pg_backend_negotiate's out");
    return negotiate(in, out);
  });
}
