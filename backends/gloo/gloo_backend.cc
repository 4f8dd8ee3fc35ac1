// gloo_backend.cc — the procgroup gloo plugin: pg_backend_negotiate and the function table.
//
// Every entry is an exception firewall: it returns a pg_status_t and, before returning an
// error, sets the message on the calling thread through host->set_error. The real work
// lives in GlooGroup (gloo_group.h) and the operation mapping (gloo_ops.h).
#include <gloo/config.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <string>

#include "gloo_group.h"
#include "gloo_ops.h"
#include "procgroup/procgroup_backend.h"

struct pg_backend_group_s {
  std::unique_ptr<procgroup::gloo_backend::GlooGroup> group;
};

struct pg_backend_work_s {
  std::shared_ptr<procgroup::gloo_backend::Work> work;
};

namespace procgroup::gloo_backend {
namespace {

#define PG_GLOO_STR2(x) #x
#define PG_GLOO_STR(x) PG_GLOO_STR2(x)
constexpr char kDescription[] =
    "Gloo " PG_GLOO_STR(GLOO_VERSION_MAJOR) "." PG_GLOO_STR(GLOO_VERSION_MINOR) "." PG_GLOO_STR(
        GLOO_VERSION_PATCH) " over TCP; CPU buffers; all ops and dtypes native";
#undef PG_GLOO_STR
#undef PG_GLOO_STR2

// The host services from negotiation; valid for as long as the plugin stays loaded. The
// ABI passes them only there, so entries that take no host find them here.
std::atomic<const pg_host_services_t*> g_host{nullptr};

template <typename Struct>
bool reaches(const Struct* s, size_t offset, size_t size) {
  return s != nullptr && s->struct_size >= offset + size;
}

bool host_has_scale_down(const pg_host_services_t* host) {
  return reaches(host, offsetof(pg_host_services_t, scale_down), sizeof(host->scale_down)) &&
         host->scale_down != nullptr;
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
    report(std::string("gloo: ") + entry + ": out of memory");
    return PG_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    report(std::string("gloo: ") + entry + ": internal error: " + e.what());
    return PG_ERR_INTERNAL;
  } catch (...) {
    report(std::string("gloo: ") + entry + ": internal error (unknown exception)");
    return PG_ERR_INTERNAL;
  }
}

Status bad(const std::string& message) {
  return Status::error(PG_ERR_INVALID_ARGUMENT, "gloo: " + message);
}

Status check_config(const pg_backend_group_config_t* c) {
  if (c == nullptr) return bad("group_create: config is NULL");
  if (!reaches(c, offsetof(pg_backend_group_config_t, master_addr), sizeof(c->master_addr))) {
    return bad("group_create: config struct_size " + std::to_string(c->struct_size) +
               " is too small");
  }
  if (c->size < 1 || c->rank < 0 || c->rank >= c->size) {
    return bad("group_create: rank " + std::to_string(c->rank) + " of size " +
               std::to_string(c->size) + " is invalid");
  }
  if (c->timeout_ms <= 0) return bad("group_create: timeout_ms must be > 0");
  const pg_host_store_t* s = c->store;
  if (s == nullptr || !reaches(s, offsetof(pg_host_store_t, free_value), sizeof(s->free_value)) ||
      s->set == nullptr || s->get == nullptr || s->free_value == nullptr) {
    return bad("group_create: the store is missing or incomplete");
  }
  return {};
}

pg_status_t group_create(const pg_backend_group_config_t* config, pg_backend_group_t* out) {
  return guarded("group_create", [&]() -> Status {
    if (out == nullptr) return bad("group_create: out is NULL");
    Status st = check_config(config);
    if (!st.ok()) return st;
    const pg_host_services_t* host = g_host.load();
    if (host == nullptr) {
      return Status::error(PG_ERR_INTERNAL, "gloo: group_create before pg_backend_negotiate");
    }
    auto handle = std::make_unique<pg_backend_group_s>();
    st = GlooGroup::create(*config, host, &handle->group);
    if (!st.ok()) return st;
    *out = handle.release();
    return {};
  });
}

pg_status_t group_destroy(pg_backend_group_t group) {
  return guarded("group_destroy", [&]() -> Status {
    if (group == nullptr) return bad("group_destroy: group is NULL");
    delete group;
    return {};
  });
}

pg_status_t group_abort(pg_backend_group_t group) {
  return guarded("group_abort", [&]() -> Status {
    if (group == nullptr) return bad("group_abort: group is NULL");
    group->group->abort();
    return {};
  });
}

Status work_result(pg_status_t status, const std::string& message) {
  return Status{status, message};
}

pg_status_t work_test(pg_backend_work_t work) {
  return guarded("work_test", [&]() -> Status {
    if (work == nullptr) return bad("work_test: work is NULL");
    std::string message;
    const pg_status_t st = work->work->test(&message);
    return work_result(st, message);
  });
}

pg_status_t work_wait(pg_backend_work_t work, int64_t timeout_ms) {
  return guarded("work_wait", [&]() -> Status {
    if (work == nullptr) return bad("work_wait: work is NULL");
    std::string message;
    const pg_status_t st = work->work->wait(timeout_ms, &message);
    return work_result(st, message);
  });
}

pg_status_t work_on_complete(pg_backend_work_t work, pg_backend_work_done_fn done, void* user) {
  return guarded("work_on_complete", [&]() -> Status {
    if (work == nullptr || done == nullptr) return bad("work_on_complete: work and done must not be NULL");
    if (!work->work->notify_on_complete(done, user)) {
      return bad("work_on_complete: a completion notice was asked for this work already");
    }
    return {};
  });
}

void work_release(pg_backend_work_t work) {
  // Dropping the handle's reference: a pending work goes on in the group's queues.
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
    if (op->struct_size < sizeof(pg_backend_op_t)) {
      return bad(name + ": op struct_size " + std::to_string(op->struct_size) + " is too small");
    }
    if (op->op != kOp) {
      return bad(name + ": the op field says " + op_name(op->op));
    }
    auto handle = std::make_unique<pg_backend_work_s>();
    Status st = group->group->submit(*op, &handle->work);
    if (!st.ok()) return st;
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
    nullptr,  // group_split: the core makes subgroups with group_create
    &work_on_complete,
};

}  // namespace
}  // namespace procgroup::gloo_backend

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  using namespace procgroup::gloo_backend;
  try {
    if (in == nullptr || out == nullptr) return PG_ERR_INVALID_ARGUMENT;
    const pg_host_services_t* host = nullptr;
    if (reaches(in, offsetof(pg_backend_negotiate_in_t, host), sizeof(in->host))) host = in->host;
    if (host != nullptr) g_host.store(host);
    if (in->min_version > PG_BACKEND_INTERFACE_VERSION ||
        in->max_version < PG_BACKEND_INTERFACE_VERSION) {
      report("gloo: the core speaks interface versions " + std::to_string(in->min_version) + ".." +
             std::to_string(in->max_version) + "; this plugin speaks 1");
      return PG_ERR_ABI_MISMATCH;
    }
    if (host == nullptr) return PG_ERR_INVALID_ARGUMENT;
    uint32_t reduce_ops =
        1u << PG_REDUCE_SUM | 1u << PG_REDUCE_PROD | 1u << PG_REDUCE_MIN | 1u << PG_REDUCE_MAX;
    if (host_has_scale_down(host)) reduce_ops |= 1u << PG_REDUCE_AVG;
    auto fits = [&](size_t offset, size_t size) { return reaches(out, offset, size); };
    using Out = pg_backend_negotiate_out_t;
    if (fits(offsetof(Out, version), sizeof(out->version))) out->version = 1;
    if (fits(offsetof(Out, name), sizeof(out->name))) out->name = "gloo";
    if (fits(offsetof(Out, description), sizeof(out->description))) out->description = kDescription;
    if (fits(offsetof(Out, native_ops), sizeof(out->native_ops))) {
      out->native_ops = (1u << PG_OP_COUNT_) - 1;  // all eleven
    }
    if (fits(offsetof(Out, native_dtypes), sizeof(out->native_dtypes))) {
      out->native_dtypes = ((1u << PG_DTYPE_COUNT_) - 1) & ~(1u << PG_DTYPE_INVALID);
    }
    if (fits(offsetof(Out, native_reduce_ops), sizeof(out->native_reduce_ops))) {
      out->native_reduce_ops = reduce_ops;
    }
    if (fits(offsetof(Out, devices), sizeof(out->devices))) out->devices = 1u << PG_DEVICE_CPU;
    if (fits(offsetof(Out, ops), sizeof(out->ops))) out->ops = &kOps;
    return PG_OK;
  } catch (...) {
    return PG_ERR_INTERNAL;
  }
}
