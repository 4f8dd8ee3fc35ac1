// The extern "C" entry points of procgroup.h. Each one is a c_guard: it checks its
// pointers and handles (handles.h), calls into the core, and turns a Status or an exception
// into a status code plus the thread's pg_last_error() message, which names the entry point
// (`fn`, captured outside the lambda, where __func__ would say "operator()").
#include <cstring>

#include "common/dtype.h"
#include "core/dispatch.h"
#include "core/group.h"
#include "core/handles.h"
#include "core/user_store.h"
#include "core/versioned_struct.h"

// The C entry points are this file's only code, each a thin call into the core.
using namespace procgroup::detail;  // NOLINT(google-build-using-namespace)

namespace {

Status null_error(const char* function, const char* argument) {
  return make_error(PG_ERR_INVALID_ARGUMENT, "{}: {} is NULL", function, argument);
}

#define PG_REQUIRE(ptr) \
  if ((ptr) == nullptr) return null_error(fn, #ptr)

// The live group behind a handle, as `group` in the calling entry point.
#define PG_LOOKUP_GROUP(group, handle) \
  PG_ASSIGN_OR_RETURN(GroupState * group, lookup_group(handle, fn, #handle))

// Hands a new group to the caller as a handle.
Status publish_group(std::shared_ptr<GroupState> state, pg_group_t* out) {
  const uint64_t handle = group_handles().insert(state);
  if (handle == 0)
    return make_error(PG_ERR_OUT_OF_MEMORY, "too many live groups (destroy unused ones)");
  *out = to_group_handle(handle);
  return ok_status();
}

Result<pg_group_options_t> read_group_options(const pg_group_options_t* options) {
  pg_group_options_t defaults = PG_GROUP_OPTIONS_INIT;
  if (options == nullptr) return defaults;
  return read_versioned(*options, kGroupOptionsV1Size, defaults, "pg_group_options_t",
                        "PG_GROUP_OPTIONS_INIT");
}

Status check_caller_version(uint32_t caller_abi_version) {
  uint32_t major = caller_abi_version >> 16, minor = caller_abi_version & 0xffffu;
  if (major != PG_ABI_VERSION_MAJOR || minor > PG_ABI_VERSION_MINOR)
    return make_error(PG_ERR_ABI_MISMATCH,
                      "this program was built against procgroup ABI {}.{} but the loaded "
                      "libprocgroup provides {}.{}",
                      major, minor, PG_ABI_VERSION_MAJOR, PG_ABI_VERSION_MINOR);
  return ok_status();
}

pg_status_t collective(const char* function, pg_op_t op, pg_group_t group, const pg_buffer_t* input,
                       const pg_buffer_t* output, const pg_op_options_t* options, pg_work_t* work) {
  return c_guard(function, [&, fn = function]() -> Status {
    PG_LOOKUP_GROUP(state, group);
    return run_op(*state, op, input, output, options, work);
  });
}

}  // namespace

extern "C" {

PG_API const char* pg_status_name(pg_status_t status) { return status_name(status); }

PG_API const char* pg_last_error(void) { return last_error(); }

PG_API pg_status_t pg_get_version(uint32_t* major, uint32_t* minor) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    PG_REQUIRE(major);
    PG_REQUIRE(minor);
    *major = PG_ABI_VERSION_MAJOR;
    *minor = PG_ABI_VERSION_MINOR;
    return ok_status();
  });
}

PG_API pg_status_t pg_group_create_versioned(uint32_t caller_abi_version,
                                             const pg_group_options_t* options, pg_group_t* out) {
  // Named after the inline wrapper (procgroup.h) that programs call.
  return c_guard("pg_group_create", [&, fn = "pg_group_create"]() -> Status {
    PG_REQUIRE(out);
    *out = nullptr;
    PG_RETURN_IF_ERROR(check_caller_version(caller_abi_version));
    PG_ASSIGN_OR_RETURN(pg_group_options_t opts, read_group_options(options));
    PG_ASSIGN_OR_RETURN(GroupConfig config, resolve_group_config(&opts, process_env()));
    PG_ASSIGN_OR_RETURN(auto state, GroupState::create(config));
    return publish_group(std::move(state), out);
  });
}

PG_API pg_status_t pg_group_create_with_store_versioned(uint32_t caller_abi_version,
                                                        const pg_group_options_t* options,
                                                        const pg_store_t* store, pg_group_t* out) {
  return c_guard("pg_group_create_with_store", [&, fn = "pg_group_create_with_store"]() -> Status {
    PG_REQUIRE(out);
    *out = nullptr;
    PG_REQUIRE(store);
    PG_RETURN_IF_ERROR(check_caller_version(caller_abi_version));
    PG_ASSIGN_OR_RETURN(pg_group_options_t opts, read_group_options(options));
    if (opts.store_url != nullptr || opts.store_token != nullptr)
      return make_error(PG_ERR_INVALID_ARGUMENT,
                        "pg_group_create_with_store: options set store_url or store_token, which "
                        "belong to procgroup's own store; the group uses the store given");
    PG_ASSIGN_OR_RETURN(auto user_store, make_user_store(*store));
    PG_ASSIGN_OR_RETURN(GroupConfig config, resolve_group_config(&opts, process_env()));
    PG_ASSIGN_OR_RETURN(auto state, GroupState::create(config, user_store));
    return publish_group(std::move(state), out);
  });
}

PG_API pg_status_t pg_group_split(pg_group_t parent, int32_t color, int32_t key, pg_group_t* out) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    PG_REQUIRE(out);
    *out = nullptr;
    PG_LOOKUP_GROUP(state, parent);
    PG_ASSIGN_OR_RETURN(auto child, state->split(color, key));
    return child ? publish_group(std::move(child), out) : ok_status();
  });
}

PG_API pg_status_t pg_group_abort(pg_group_t group) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    PG_LOOKUP_GROUP(state, group);
    state->abort(make_error(PG_ERR_ABORTED, "group '{}' was aborted by the user", state->id()));
    return ok_status();
  });
}

PG_API pg_status_t pg_group_destroy(pg_group_t group) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    if (group == nullptr) return ok_status();
    PG_LOOKUP_GROUP(state, group);
    // The handle stays live while destroy() waits, so a watchdog can still abort the group.
    Status status = state->destroy();
    group_handles().erase(reinterpret_cast<uint64_t>(group));
    return status;
  });
}

PG_API pg_status_t pg_group_rank(pg_group_t group, int32_t* rank) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    PG_REQUIRE(rank);
    PG_LOOKUP_GROUP(state, group);
    *rank = state->rank();
    return ok_status();
  });
}

PG_API pg_status_t pg_group_size(pg_group_t group, int32_t* size) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    PG_REQUIRE(size);
    PG_LOOKUP_GROUP(state, group);
    *size = state->size();
    return ok_status();
  });
}

PG_API pg_status_t pg_group_backend_name(pg_group_t group, const char** name) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    PG_REQUIRE(name);
    PG_LOOKUP_GROUP(state, group);
    *name = state->plugin().name.c_str();
    return ok_status();
  });
}

PG_API pg_status_t pg_group_capabilities(pg_group_t group, pg_capabilities_t* caps) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    PG_REQUIRE(caps);
    PG_LOOKUP_GROUP(state, group);
    if (caps->struct_size < kCapabilitiesV1Size)
      return make_error(PG_ERR_INVALID_ARGUMENT,
                        "pg_capabilities_t has struct_size {} (expected at least {}); initialise "
                        "it with PG_CAPABILITIES_INIT",
                        caps->struct_size, kCapabilitiesV1Size);
    // Written whole into a local, then only as many bytes as the caller's struct has.
    const Plugin& p = state->plugin();
    pg_capabilities_t full = PG_CAPABILITIES_INIT;
    full.native_ops = p.native_ops;
    full.native_dtypes = p.native_dtypes;
    full.native_reduce_ops = p.native_reduce_ops;
    full.devices = p.devices;
    const uint32_t caller_size = caps->struct_size;
    std::memcpy(caps, &full, std::min<size_t>(caller_size, sizeof(full)));
    caps->struct_size = caller_size;
    return ok_status();
  });
}

PG_API pg_status_t pg_allreduce(pg_group_t g, const pg_buffer_t* in, const pg_buffer_t* out,
                                const pg_op_options_t* o, pg_work_t* w) {
  return collective(__func__, PG_OP_ALLREDUCE, g, in, out, o, w);
}
PG_API pg_status_t pg_broadcast(pg_group_t g, const pg_buffer_t* in, const pg_buffer_t* out,
                                const pg_op_options_t* o, pg_work_t* w) {
  return collective(__func__, PG_OP_BROADCAST, g, in, out, o, w);
}
PG_API pg_status_t pg_reduce(pg_group_t g, const pg_buffer_t* in, const pg_buffer_t* out,
                             const pg_op_options_t* o, pg_work_t* w) {
  return collective(__func__, PG_OP_REDUCE, g, in, out, o, w);
}
PG_API pg_status_t pg_allgather(pg_group_t g, const pg_buffer_t* in, const pg_buffer_t* out,
                                const pg_op_options_t* o, pg_work_t* w) {
  return collective(__func__, PG_OP_ALLGATHER, g, in, out, o, w);
}
PG_API pg_status_t pg_reduce_scatter(pg_group_t g, const pg_buffer_t* in, const pg_buffer_t* out,
                                     const pg_op_options_t* o, pg_work_t* w) {
  return collective(__func__, PG_OP_REDUCE_SCATTER, g, in, out, o, w);
}
PG_API pg_status_t pg_gather(pg_group_t g, const pg_buffer_t* in, const pg_buffer_t* out,
                             const pg_op_options_t* o, pg_work_t* w) {
  return collective(__func__, PG_OP_GATHER, g, in, out, o, w);
}
PG_API pg_status_t pg_scatter(pg_group_t g, const pg_buffer_t* in, const pg_buffer_t* out,
                              const pg_op_options_t* o, pg_work_t* w) {
  return collective(__func__, PG_OP_SCATTER, g, in, out, o, w);
}
PG_API pg_status_t pg_alltoall(pg_group_t g, const pg_buffer_t* in, const pg_buffer_t* out,
                               const pg_op_options_t* o, pg_work_t* w) {
  return collective(__func__, PG_OP_ALLTOALL, g, in, out, o, w);
}
PG_API pg_status_t pg_barrier(pg_group_t g, const pg_op_options_t* o, pg_work_t* w) {
  return collective(__func__, PG_OP_BARRIER, g, nullptr, nullptr, o, w);
}
PG_API pg_status_t pg_send(pg_group_t g, const pg_buffer_t* buffer, const pg_op_options_t* o,
                           pg_work_t* w) {
  return collective(__func__, PG_OP_SEND, g, buffer, nullptr, o, w);
}
PG_API pg_status_t pg_recv(pg_group_t g, const pg_buffer_t* buffer, const pg_op_options_t* o,
                           pg_work_t* w) {
  return collective(__func__, PG_OP_RECV, g, nullptr, buffer, o, w);
}

PG_API pg_status_t pg_timeline_mark(pg_group_t group, const char* category, const char* name,
                                    uint64_t id, int32_t phase, uint64_t bytes) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    PG_REQUIRE(category);
    PG_REQUIRE(name);
    PG_LOOKUP_GROUP(state, group);
    if (phase < PG_TIMELINE_BEGIN || phase > PG_TIMELINE_INSTANT)
      return make_error(PG_ERR_INVALID_ARGUMENT, "{}: phase {} is not a PG_TIMELINE_* value", fn,
                        phase);
    if (Timeline* timeline = state->timeline())
      timeline->mark(state->timeline_track(), category, name, id,
                     static_cast<Timeline::Phase>(phase), bytes);
    return ok_status();
  });
}

PG_API pg_status_t pg_work_test(pg_work_t work) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    PG_ASSIGN_OR_RETURN(WorkState * state, lookup_work(work, fn));
    return state->test();
  });
}

PG_API pg_status_t pg_work_wait(pg_work_t work, int64_t timeout_ms) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    PG_ASSIGN_OR_RETURN(WorkState * state, lookup_work(work, fn));
    // The work's own deadline bounds the wait anyway; a longer one must not overflow.
    Deadline until = timeout_ms < 0 || timeout_ms > kMaxTimeout.count()
                         ? Deadline::never()
                         : Deadline::after(Millis(timeout_ms));
    return state->wait(until);
  });
}

PG_API pg_status_t pg_work_release(pg_work_t work) {
  return c_guard(__func__, [&, fn = __func__]() -> Status {
    if (work == nullptr) return ok_status();
    std::shared_ptr<WorkState> state = work_handles().erase(reinterpret_cast<uint64_t>(work));
    if (!state) return stale_handle(fn, "work", "work", "released");
    if (!state->done()) {
      if (auto group = state->group()) group->detach(std::move(state));
    }
    return ok_status();
  });
}

PG_API pg_status_t pg_work_on_complete(pg_work_t work, pg_work_callback_t fn, void* user) {
  return c_guard(__func__, [&, name = __func__]() -> Status {
    PG_ASSIGN_OR_RETURN(WorkState * state, lookup_work(work, name));
    if (fn == nullptr) return make_error(PG_ERR_INVALID_ARGUMENT, "{}: fn is NULL", name);
    return state->on_complete([fn, user](const Status& status) {
      if (!status.ok()) set_last_error(status.message());  // pg_last_error() inside fn
      fn(status.code(), user);
    });
  });
}

}  // extern "C"
