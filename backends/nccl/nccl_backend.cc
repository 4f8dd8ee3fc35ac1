// nccl_backend.cc — the procgroup nccl plugin: pg_backend_negotiate and the function table.
//
// Every entry is an exception firewall: it returns a pg_status_t and, before returning an
// error, sets the message on the calling thread through host->set_error. Loading needs no
// GPU (only libcudart and libnccl); a host without a CUDA device fails group_create with
// PG_ERR_UNSUPPORTED "no CUDA device: ...".
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <string>

#include "nccl_group.h"
#include "nccl_plan.h"
#include "procgroup/procgroup_backend.h"

struct pg_backend_group_s {
  std::unique_ptr<procgroup::nccl_backend::Group> group;
};

struct pg_backend_work_s {
  std::shared_ptr<procgroup::nccl_backend::Work> work;
};

namespace procgroup::nccl_backend {
namespace {

#define PG_NCCL_STR2(x) #x
#define PG_NCCL_STR(x) PG_NCCL_STR2(x)
constexpr char kDescription[] =
    "NCCL " PG_NCCL_STR(NCCL_MAJOR) "." PG_NCCL_STR(NCCL_MINOR) "." PG_NCCL_STR(
        NCCL_PATCH) " (headers), CUDA runtime " PG_NCCL_STR(CUDART_VERSION)
        "; CUDA device buffers only; all ops, dtypes and reduce ops native";
#undef PG_NCCL_STR
#undef PG_NCCL_STR2

// The host services from negotiation; valid for as long as the plugin stays loaded. The
// ABI passes them only there, so entries that take no host find them here.
std::atomic<const pg_host_services_t*> g_host{nullptr};

template <typename Struct>
bool reaches(const Struct* s, size_t offset, size_t size) {
  return s != nullptr && s->struct_size >= offset + size;
}

void report(const std::string& message) {
  const pg_host_services_t* host = g_host.load();
  if (reaches(host, offsetof(pg_host_services_t, set_error), sizeof(host->set_error)) &&
      host->set_error != nullptr) {
    host->set_error(host->ctx, message.c_str());
  }
}

// Runs fn, turns its Status (or any exception) into a pg_status_t, reports errors.
template <typename Fn>
pg_status_t guarded(const char* entry, Fn&& fn) noexcept {
  try {
    Status st = fn();
    if (st.code != PG_OK && st.code != PG_PENDING) report(st.message);
    return st.code;
  } catch (const std::bad_alloc&) {
    report(std::string("nccl: ") + entry + ": out of memory");
    return PG_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    report(std::string("nccl: ") + entry + ": internal error: " + e.what());
    return PG_ERR_INTERNAL;
  } catch (...) {
    report(std::string("nccl: ") + entry + ": internal error (unknown exception)");
    return PG_ERR_INTERNAL;
  }
}

Status bad(const std::string& message) { return Status::error(PG_ERR_INVALID_ARGUMENT, message); }

Status check_config(const pg_backend_group_config_t* c, const std::string& entry) {
  if (c == nullptr) return bad(entry + ": config is NULL");
  if (!reaches(c, offsetof(pg_backend_group_config_t, master_addr), sizeof(c->master_addr))) {
    return bad(entry + ": config struct_size " + std::to_string(c->struct_size) + " is too small");
  }
  if (c->size < 1 || c->rank < 0 || c->rank >= c->size) {
    return bad(entry + ": rank " + std::to_string(c->rank) + " of size " + std::to_string(c->size) +
               " is invalid");
  }
  if (c->timeout_ms <= 0) return bad(entry + ": timeout_ms must be > 0");
  const pg_host_store_t* s = c->store;
  if (s == nullptr || !reaches(s, offsetof(pg_host_store_t, free_value), sizeof(s->free_value)) ||
      s->set == nullptr || s->get == nullptr || s->free_value == nullptr) {
    return bad(entry + ": the store is missing or incomplete");
  }
  return {};
}

pg_status_t group_create(const pg_backend_group_config_t* config, pg_backend_group_t* out) {
  return guarded("group_create", [&]() -> Status {
    if (out == nullptr) return bad("group_create: out is NULL");
    PG_NCCL_TRY(check_config(config, "group_create"));
    auto handle = std::make_unique<pg_backend_group_s>();
    PG_NCCL_TRY(Group::create(*config, g_host.load(), &handle->group));
    *out = handle.release();
    return {};
  });
}

// key is not passed on: the core's child rank (config->rank) already orders by it.
pg_status_t group_split(pg_backend_group_t parent, int32_t color, int32_t /*key*/,
                        const pg_backend_group_config_t* config, pg_backend_group_t* out) {
  return guarded("group_split", [&]() -> Status {
    if (parent == nullptr || out == nullptr)
      return bad("group_split: parent and out must not be NULL");
    *out = nullptr;
    if (color == PG_SPLIT_NO_COLOR) {
      if (config != nullptr) return bad("group_split: a config for PG_SPLIT_NO_COLOR");
    } else {
      if (color < 0) return bad("group_split: color " + std::to_string(color) + " is negative");
      PG_NCCL_TRY(check_config(config, "group_split"));
    }
    std::unique_ptr<Group> child;
    PG_NCCL_TRY(parent->group->split(color, config, g_host.load(), &child));
    if (child == nullptr) return {};
    auto handle = std::make_unique<pg_backend_group_s>();
    handle->group = std::move(child);
    *out = handle.release();
    return {};
  });
}

pg_status_t group_destroy(pg_backend_group_t group) {
  return guarded("group_destroy", [&]() -> Status {
    if (group == nullptr) return bad("group_destroy: group is NULL");
    std::unique_ptr<pg_backend_group_s> owned(group);
    return owned->group->destroy();
  });
}

pg_status_t group_abort(pg_backend_group_t group) {
  return guarded("group_abort", [&]() -> Status {
    if (group == nullptr) return bad("group_abort: group is NULL");
    group->group->abort();
    return {};
  });
}

pg_status_t work_test(pg_backend_work_t work) {
  return guarded("work_test", [&]() -> Status {
    if (work == nullptr) return bad("work_test: work is NULL");
    return work->work->test();
  });
}

pg_status_t work_wait(pg_backend_work_t work, int64_t timeout_ms) {
  return guarded("work_wait", [&]() -> Status {
    if (work == nullptr) return bad("work_wait: work is NULL");
    return work->work->wait(timeout_ms);
  });
}

void work_release(pg_backend_work_t work) {
  // Dropping the handle: a pending work goes on (its communicator keeps what it needs).
  (void)guarded("work_release", [&]() -> Status {
    delete work;
    return {};
  });
}

template <pg_op_t kOp>
pg_status_t op_entry(pg_backend_group_t group, const pg_backend_op_t* op, pg_backend_work_t* work) {
  return guarded(op_name(kOp), [&]() -> Status {
    const std::string name = op_name(kOp);
    if (group == nullptr || op == nullptr || work == nullptr) {
      return bad(name + ": group, op and work must not be NULL");
    }
    // Version 1's op ends at output; later appends (the core's plan) are not read here.
    if (!reaches(op, offsetof(pg_backend_op_t, output), sizeof(op->output))) {
      return bad(name + ": op struct_size " + std::to_string(op->struct_size) + " is too small");
    }
    if (op->op != kOp) return bad(name + ": the op field says " + op_name(op->op));
    // Checks that need no communicator come before the group is touched.
    PG_NCCL_TRY(check_buffer_kinds(*op));
    auto handle = std::make_unique<pg_backend_work_s>();
    PG_NCCL_TRY(group->group->submit(*op, &handle->work));
    *work = handle.release();
    return {};
  });
}

const pg_backend_ops_t kOps = {
    sizeof(pg_backend_ops_t),
    0,
    &group_create,
    &group_destroy,
    &group_abort,
    &work_test,
    &work_wait,
    &work_release,
    &op_entry<PG_OP_ALLREDUCE>,
    &op_entry<PG_OP_BROADCAST>,
    &op_entry<PG_OP_REDUCE>,
    &op_entry<PG_OP_ALLGATHER>,
    &op_entry<PG_OP_REDUCE_SCATTER>,
    &op_entry<PG_OP_GATHER>,
    &op_entry<PG_OP_SCATTER>,
    &op_entry<PG_OP_ALLTOALL>,
    &op_entry<PG_OP_BARRIER>,
    &op_entry<PG_OP_SEND>,
    &op_entry<PG_OP_RECV>,
    &group_split,
    nullptr,  // work_on_complete: completion is a CUDA event, found by polling
};

}  // namespace
}  // namespace procgroup::nccl_backend

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  using namespace procgroup::nccl_backend;
  try {
    if (in == nullptr || out == nullptr) return PG_ERR_INVALID_ARGUMENT;
    const pg_host_services_t* host = nullptr;
    if (reaches(in, offsetof(pg_backend_negotiate_in_t, host), sizeof(in->host))) host = in->host;
    if (host != nullptr) g_host.store(host);
    if (in->min_version > PG_BACKEND_INTERFACE_VERSION ||
        in->max_version < PG_BACKEND_INTERFACE_VERSION) {
      report("nccl: the core speaks interface versions " + std::to_string(in->min_version) + ".." +
             std::to_string(in->max_version) + "; this plugin speaks 1");
      return PG_ERR_ABI_MISMATCH;
    }
    if (host == nullptr) return PG_ERR_INVALID_ARGUMENT;
    auto fits = [&](size_t offset, size_t size) { return reaches(out, offset, size); };
    using Out = pg_backend_negotiate_out_t;
    if (fits(offsetof(Out, version), sizeof(out->version))) out->version = 1;
    if (fits(offsetof(Out, name), sizeof(out->name))) out->name = "nccl";
    if (fits(offsetof(Out, description), sizeof(out->description))) out->description = kDescription;
    if (fits(offsetof(Out, native_ops), sizeof(out->native_ops))) {
      out->native_ops = (1u << PG_OP_COUNT_) - 1;  // all eleven
    }
    if (fits(offsetof(Out, native_dtypes), sizeof(out->native_dtypes))) {
      out->native_dtypes = ((1u << PG_DTYPE_COUNT_) - 1) & ~(1u << PG_DTYPE_INVALID);
    }
    if (fits(offsetof(Out, native_reduce_ops), sizeof(out->native_reduce_ops))) {
      out->native_reduce_ops = (1u << PG_REDUCE_COUNT_) - 1;  // avg is ncclAvg
    }
    if (fits(offsetof(Out, devices), sizeof(out->devices))) out->devices = 1u << PG_DEVICE_CUDA;
    if (fits(offsetof(Out, ops), sizeof(out->ops))) out->ops = &kOps;
    return PG_OK;
  } catch (...) {
    return PG_ERR_INTERNAL;
  }
}
