// The extern "C" entry points of procgroup.h. Each one is a c_guard: it checks its
// pointers, calls into the core, and turns a Status or an exception into a status code
// plus the thread's pg_last_error() message.
#include <cstring>

#include "common/dtype.h"
#include "core/dispatch.h"
#include "core/group.h"
#include "core/user_store.h"
#include "core/versioned_struct.h"

using namespace procgroup::detail;

namespace {

Status null_error(const char* function, const char* argument) {
  return make_error(PG_ERR_INVALID_ARGUMENT, "{}: {} is NULL", function, argument);
}

#define PG_REQUIRE(ptr) \
  if ((ptr) == nullptr) return null_error(__func__, #ptr)

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
  return c_guard(function, [&]() -> Status {
    if (group == nullptr) return null_error(function, "group");
    return run_op(*group->state, op, input, output, options, work);
  });
}

}  // namespace

extern "C" {

PG_API const char* pg_status_name(pg_status_t status) { return status_name(status); }

PG_API const char* pg_last_error(void) { return last_error(); }

PG_API pg_status_t pg_get_version(uint32_t* major, uint32_t* minor) {
  return c_guard(__func__, [&]() -> Status {
    PG_REQUIRE(major);
    PG_REQUIRE(minor);
    *major = PG_ABI_VERSION_MAJOR;
    *minor = PG_ABI_VERSION_MINOR;
    return ok_status();
  });
}

PG_API pg_status_t pg_group_create_versioned(uint32_t caller_abi_version,
                                             const pg_group_options_t* options, pg_group_t* out) {
  return c_guard(__func__, [&]() -> Status {
    PG_REQUIRE(out);
    *out = nullptr;
    PG_RETURN_IF_ERROR(check_caller_version(caller_abi_version));
    PG_ASSIGN_OR_RETURN(pg_group_options_t opts, read_group_options(options));
    PG_ASSIGN_OR_RETURN(GroupConfig config, resolve_group_config(&opts, process_env()));
    PG_ASSIGN_OR_RETURN(auto state, GroupState::create(config));
    *out = new pg_group_s{std::move(state)};
    return ok_status();
  });
}

PG_API pg_status_t pg_group_create_with_store_versioned(uint32_t caller_abi_version,
                                                        const pg_group_options_t* options,
                                                        const pg_store_t* store, pg_group_t* out) {
  return c_guard(__func__, [&]() -> Status {
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
    PG_ASSIGN_OR_RETURN(auto state, GroupState::create(config, std::move(user_store)));
    *out = new pg_group_s{std::move(state)};
    return ok_status();
  });
}

PG_API pg_status_t pg_group_split(pg_group_t parent, int32_t color, int32_t key, pg_group_t* out) {
  return c_guard(__func__, [&]() -> Status {
    PG_REQUIRE(parent);
    PG_REQUIRE(out);
    *out = nullptr;
    PG_ASSIGN_OR_RETURN(auto child, parent->state->split(color, key));
    if (child) *out = new pg_group_s{std::move(child)};
    return ok_status();
  });
}

PG_API pg_status_t pg_group_abort(pg_group_t group) {
  return c_guard(__func__, [&]() -> Status {
    PG_REQUIRE(group);
    group->state->abort(
        make_error(PG_ERR_ABORTED, "group '{}' was aborted by the user", group->state->id()));
    return ok_status();
  });
}

PG_API pg_status_t pg_group_destroy(pg_group_t group) {
  return c_guard(__func__, [&]() -> Status {
    if (group == nullptr) return ok_status();
    Status status = group->state->destroy();
    delete group;
    return status;
  });
}

PG_API pg_status_t pg_group_rank(pg_group_t group, int32_t* rank) {
  return c_guard(__func__, [&]() -> Status {
    PG_REQUIRE(group);
    PG_REQUIRE(rank);
    *rank = group->state->rank();
    return ok_status();
  });
}

PG_API pg_status_t pg_group_size(pg_group_t group, int32_t* size) {
  return c_guard(__func__, [&]() -> Status {
    PG_REQUIRE(group);
    PG_REQUIRE(size);
    *size = group->state->size();
    return ok_status();
  });
}

PG_API pg_status_t pg_group_backend_name(pg_group_t group, const char** name) {
  return c_guard(__func__, [&]() -> Status {
    PG_REQUIRE(group);
    PG_REQUIRE(name);
    *name = group->state->plugin().name.c_str();
    return ok_status();
  });
}

PG_API pg_status_t pg_group_capabilities(pg_group_t group, pg_capabilities_t* caps) {
  return c_guard(__func__, [&]() -> Status {
    PG_REQUIRE(group);
    PG_REQUIRE(caps);
    if (caps->struct_size < kCapabilitiesV1Size)
      return make_error(PG_ERR_INVALID_ARGUMENT,
                        "pg_capabilities_t has struct_size {} (expected at least {}); initialise "
                        "it with PG_CAPABILITIES_INIT",
                        caps->struct_size, kCapabilitiesV1Size);
    // Written whole into a local, then only as many bytes as the caller's struct has.
    const Plugin& p = group->state->plugin();
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
    PG_REQUIRE(group);
    PG_REQUIRE(category);
    PG_REQUIRE(name);
    if (phase < PG_TIMELINE_BEGIN || phase > PG_TIMELINE_INSTANT)
      return make_error(PG_ERR_INVALID_ARGUMENT, "{}: phase {} is not a PG_TIMELINE_* value", fn,
                        phase);
    GroupState& state = *group->state;
    if (Timeline* timeline = state.timeline())
      timeline->mark(state.timeline_track(), category, name, id,
                     static_cast<Timeline::Phase>(phase), bytes);
    return ok_status();
  });
}

PG_API pg_status_t pg_work_test(pg_work_t work) {
  return c_guard(__func__, [&]() -> Status {
    PG_REQUIRE(work);
    return work->state->test();
  });
}

PG_API pg_status_t pg_work_wait(pg_work_t work, int64_t timeout_ms) {
  return c_guard(__func__, [&]() -> Status {
    PG_REQUIRE(work);
    Deadline until = timeout_ms < 0 ? Deadline::never() : Deadline::after(Millis(timeout_ms));
    return work->state->wait(until);
  });
}

PG_API pg_status_t pg_work_release(pg_work_t work) {
  return c_guard(__func__, [&]() -> Status {
    if (work != nullptr && !work->state->done()) {
      if (auto group = work->state->group()) group->detach(work->state);
    }
    delete work;
    return ok_status();
  });
}

}  // extern "C"
