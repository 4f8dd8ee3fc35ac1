#include "core/dispatch.h"

#include "collectives/algorithms.h"
#include "collectives/reduce.h"
#include "common/dtype.h"
#include "core/backend_transport.h"
#include "core/fingerprint.h"
#include "core/handles.h"
#include "core/plugin_call.h"
#include "procgroup/backend_kit/op_table.hpp"

namespace procgroup::detail {
namespace {

// Every operation the op table says the core emulates has its algorithm, and only those.
constexpr bool fallbacks_match_table() {
  for (const kit::OpInfo& info : kit::kOps) {
    if ((kFallbacks[info.op] != nullptr) != info.emulated) return false;
  }
  return true;
}
// Under -fsanitize=undefined (with ASan) a function's address is no constant expression;
// the other builds check the table at compile time.
#if !defined(__SANITIZE_ADDRESS__)
static_assert(fallbacks_match_table(), "kFallbacks and kit::kOps disagree on `emulated`");
#endif

bool has_bit(uint32_t mask, int bit) { return (mask >> bit) & 1u; }

// How an operation will run on this backend.
struct Route {
  enum Kind { kNative, kEmulated } kind = kNative;
  OpArgs args;               // what the backend (or the algorithm) is given
  bool scale_after = false;  // AVG computed as SUM: divide the output afterwards
};

bool native_ok(const Plugin& p, const OpArgs& a) {
  const kit::OpInfo& info = kit::op_info(a.op);
  if (kit::table_entry(*p.ops, a.op) == nullptr || !has_bit(p.native_ops, a.op)) return false;
  if (a.op == PG_OP_BARRIER) return true;
  if (!info.p2p && !has_bit(p.native_dtypes, a.dtype)) return false;
  return !info.reducing || has_bit(p.native_reduce_ops, a.options.reduce_op);
}

// Fills *route, the caller's (written in place: the issue path copies no more than it must).
Status choose_route(const Plugin& p, const OpArgs& args, Route* out) {
  Route& route = *out;
  route = Route{Route::kNative, args, false};
  // A barrier moves no user data, so it has no device of its own to check.
  if (args.op == PG_OP_BARRIER && native_ok(p, args)) return ok_status();
  if (!has_bit(p.devices, args.device))
    return make_error(PG_ERR_UNSUPPORTED, "backend '{}' does not handle {} buffers{}", p.name,
                      device_name(args.device),
                      args.device == PG_DEVICE_CUDA ? "; use PROCGROUP_BACKEND=nccl for CUDA" : "");
  if (native_ok(p, args)) return ok_status();
  if (kit::op_info(args.op).reducing && args.options.reduce_op == PG_REDUCE_AVG &&
      args.device == PG_DEVICE_CPU) {
    route.args.options.reduce_op = PG_REDUCE_SUM;
    route.scale_after = true;
    if (native_ok(p, route.args)) return ok_status();
    route = Route{Route::kNative, args, false};
  }
  if (args.op == PG_OP_BARRIER) {
    // A one-element allreduce is a barrier; use a dtype the backend has natively.
    for (pg_dtype_t dtype : {PG_DTYPE_U8, PG_DTYPE_I32, PG_DTYPE_F32, PG_DTYPE_I64}) {
      OpArgs tiny = args;
      tiny.op = PG_OP_ALLREDUCE;
      tiny.dtype = dtype;
      tiny.n = 1;
      tiny.in_place = true;  // submit_native gives it one element of scratch as both buffers
      if (native_ok(p, tiny)) {
        route = Route{Route::kNative, tiny, false};
        return ok_status();
      }
    }
  }
  if (args.device != PG_DEVICE_CPU)
    return make_error(PG_ERR_UNSUPPORTED,
                      "backend '{}' has no native {} for {} on {} buffers and the core can only "
                      "emulate operations on CPU buffers",
                      p.name, op_name(args.op), dtype_name(args.dtype), device_name(args.device));
  if (!kit::op_info(args.op).emulated || p.ops->send == nullptr || p.ops->recv == nullptr ||
      !has_bit(p.native_ops, PG_OP_SEND) || !has_bit(p.native_ops, PG_OP_RECV))
    return make_error(PG_ERR_UNSUPPORTED,
                      "backend '{}' does not support {} ({}) and offers no send/recv to emulate it",
                      p.name, op_name(args.op), describe(args));
  route.kind = Route::kEmulated;
  return ok_status();
}

// The rank-local scaling that completes an AVG computed as SUM.
Status scale_output(const OpArgs& a, int rank, int size) {
  if (a.op == PG_OP_REDUCE && a.options.root != rank) return ok_status();
  return scale_down(a.output.data, a.n, a.dtype, static_cast<uint64_t>(size));
}

Status run_emulated(GroupState& group, const OpArgs& a, uint64_t seq, Deadline deadline) {
  BackendTransport transport(group, seq, deadline);
  CollectiveArgs c;
  c.input = a.input.data;
  c.output = a.output.data;
  c.count = a.n;
  c.dtype = a.dtype;
  c.reduce_op = a.options.reduce_op;
  c.root = a.options.root;
  c.tag_base = PG_BACKEND_RESERVED_TAG_BASE + seq * kTagsPerCollective;
  return kFallbacks[a.op](transport, c);
}

// A native submission: the backend's work, and what completes it once that succeeds.
struct Submitted {
  pg_backend_work_t work = nullptr;
  std::function<Status()> on_success;  // AVG's scaling, or keeping the barrier's scratch
};

// Hands the operation to the backend. timeout: what is left of the op's timeout now (the
// plugin's op.timeout_ms).
Status submit_native(GroupState& group, const Route& route, uint64_t seq, Millis timeout,
                     const OpTrace& trace, Submitted* out) {
  const Plugin& p = group.plugin();
  OpArgs args = route.args;
  // Barrier-as-allreduce: one element of scratch, owned by the completion hook.
  std::shared_ptr<int64_t> scratch;
  if (args.op == PG_OP_ALLREDUCE && args.input.data == nullptr && args.n == 1) {
    scratch = std::make_shared<int64_t>(0);
    args.input = pg_buffer_cpu(scratch.get(), 1, args.dtype);
    args.output = args.input;
  }
  pg_backend_op_t op = backend_op_of(args, seq, timeout.count());
  trace_op_started(group.timeline(), trace);
  PG_RETURN_IF_ERROR(call_plugin(p.name, op_name(args.op), [&] {
    return kit::table_entry(*p.ops, args.op)(group.backend_group(), &op, &out->work);
  }));
  // Empty in the common case: nothing to allocate.
  if (route.scale_after) {
    int rank = group.rank(), size = group.size();
    out->on_success = [args, rank, size] { return scale_output(args, rank, size); };
  } else if (scratch) {
    out->on_success = [scratch] { return ok_status(); };
  }
  return ok_status();
}

// Submits natively; the backend work is adopted by work, which completes with it.
Status submit_adopted(GroupState& group, const Route& route, uint64_t seq, Millis timeout,
                      WorkState& work) {
  Submitted submitted;
  PG_RETURN_IF_ERROR(submit_native(group, route, seq, timeout, work.trace(), &submitted));
  const Plugin& p = group.plugin();
  work.adopt_backend_work(p.ops, p.work_on_complete, p.name, submitted.work,
                          std::move(submitted.on_success));
  return ok_status();
}

// An operation past validation: its route, number, deadline and records.
struct Issued {
  Route route;
  OpLabel label;
  Millis timeout{0};  // the op's own or the group's
  Deadline deadline = Deadline::never();
  uint64_t trace_id = 0;
  OpTrace trace;
  bool check = false;   // fingerprints compared first (PROCGROUP_DEBUG=DETAIL)
  bool direct = false;  // native, unchecked, nothing queued: submitted on the caller's thread
};

Status issue(GroupState& group, const OpArgs& args, Issued* out) {
  PG_RETURN_IF_ERROR(group.check_usable());
  PG_RETURN_IF_ERROR(choose_route(group.plugin(), args, &out->route));
  const bool p2p = kit::op_info(args.op).p2p;
  out->label.args = args;
  out->label.seq = p2p ? 0 : group.next_seq();
  out->check = group.debug_detail() && !p2p;
  out->timeout = args.options.timeout_ms > 0 ? Millis(args.options.timeout_ms) : group.timeout();
  const Clock::time_point now = Clock::now();  // the one clock read of the issue path
  out->deadline = Deadline(now + out->timeout);
  out->trace_id = group.recorder().start(out->label, now);
  out->trace = trace_op_issued(group.timeline(), group.timeline_track(), out->label);
  out->direct = out->route.kind == Route::kNative && !out->check && !group.runner().busy();
  return ok_status();
}

Status submit_issued(GroupState& group, const Issued& op, std::shared_ptr<WorkState>* work) {
  auto state = std::make_shared<WorkState>(group.weak_from_this(), op.label, op.deadline,
                                           op.trace_id, op.trace);
  const bool native = op.route.kind == Route::kNative;
  if (op.direct) {
    Status submitted = submit_adopted(group, op.route, op.label.seq, op.timeout, *state);
    if (!submitted.ok()) {
      Status failure = submitted.with_context(op.label.to_string());
      state->complete(failure);  // records it and fails the group if it was fatal
      return failure;
    }
  } else {
    // Behind queued emulated work (or emulated, or checked, itself): issued in order by the
    // runner. A native operation is only submitted there and its backend work completes
    // it, so a recv never waits for a send queued after it. An emulated one runs to the
    // end, after every native work issued before it, so data dependencies hold.
    std::vector<std::shared_ptr<WorkState>> before;
    if (!native) before = group.pending_native_works();
    auto owner = group.shared_from_this();
    group.runner().post([owner, state, route = op.route, label = op.label, deadline = op.deadline,
                         before, check = op.check] {
      for (auto& earlier : before) {
        // Point-to-point works are not waited for: a recv posted before a collective may
        // match a send the peer issues only after it.
        if (kit::op_info(earlier->label().args.op).p2p) continue;
        Status s = earlier->wait(deadline);
        if (!s.ok() && s.code() != PG_PENDING) break;  // its failure already failed the group
      }
      // Not check_usable(): a group being destroyed still runs what was queued.
      Status status = owner->check_not_failed();
      if (status.ok() && check)
        status = check_fingerprints(*owner, route.args, label.seq, deadline);
      if (status.ok() && route.kind == Route::kNative) {
        status = submit_adopted(*owner, route, label.seq, deadline.remaining(), *state);
        if (status.ok()) return;  // the adopted backend work completes it
      } else if (status.ok()) {
        trace_op_started(owner->timeline(), state->trace());
        status = run_emulated(*owner, route.args, label.seq, deadline);
      }
      if (!status.ok() && status.code() != PG_ERR_MISMATCH)
        status = status.with_context(label.to_string());
      state->complete(status);
    });
  }
  group.track(state, native);
  *work = std::move(state);
  return ok_status();
}

// A direct operation run to completion on the caller's thread, with no WorkState to
// allocate and track (GroupState::enter_blocking lets destroy() wait for it instead). The
// backend is waited for in slices, as WorkState::wait does, so that an abort from another
// thread (which the backend turns into a prompt failure) and the deadline are noticed.
Status run_direct_blocking(GroupState& group, const Issued& op) {
  const Plugin& p = group.plugin();
  Submitted submitted;
  Status status = submit_native(group, op.route, op.label.seq, op.timeout, op.trace, &submitted);
  if (!status.ok()) {
    status = status.with_context(op.label.to_string());
    Status ended = status;
    group.end_op(op.label, op.trace_id, op.trace, ended);  // fails the group if fatal
    return status;
  }
  for (;;) {
    status = poll_backend_work(p.name, *p.ops, submitted.work, op.deadline.slice(Millis(100)));
    if (status.code() != PG_PENDING) {
      if (!status.ok()) status = status.with_context(op.label.to_string());
      break;
    }
    if (op.deadline.expired()) {
      status = group.describe_timeout(op.label);
      break;
    }
  }
  if (status.ok() && submitted.on_success) status = submitted.on_success();
  p.ops->work_release(submitted.work);
  group.end_op(op.label, op.trace_id, op.trace, status);
  return status;
}

// A blocking call: direct when it can be, else as a work waited for here.
Status run_blocking(GroupState& group, const OpArgs& args) {
  // A call holds no reference to its group (lookup_group), and this one touches the group
  // after its op completes, when a destroy on another thread may be about to free it.
  const std::shared_ptr<GroupState> keep = group.shared_from_this();
  BlockingCall call(group);
  std::shared_ptr<WorkState> work;
  if (call.entered()) {
    Issued op;
    PG_RETURN_IF_ERROR(issue(group, args, &op));
    if (op.direct) return run_direct_blocking(group, op);
    PG_RETURN_IF_ERROR(submit_issued(group, op, &work));
  } else {
    PG_RETURN_IF_ERROR(submit_op(group, args, &work));  // a troubled group: this path says why
  }
  return work->wait(Deadline::never());
}

}  // namespace

Status submit_op(GroupState& group, const OpArgs& args, std::shared_ptr<WorkState>* work) {
  Issued op;
  PG_RETURN_IF_ERROR(issue(group, args, &op));
  return submit_issued(group, op, work);
}

Status run_op(GroupState& group, pg_op_t op, const pg_buffer_t* input, const pg_buffer_t* output,
              const pg_op_options_t* options, pg_work_t* work_out) {
  PG_ASSIGN_OR_RETURN(pg_op_options_t opts, read_op_options(options));
  PG_ASSIGN_OR_RETURN(OpArgs args,
                      make_op_args(op, input, output, opts, group.rank(), group.size()));
  if (work_out == nullptr) return run_blocking(group, args);
  std::shared_ptr<WorkState> work;
  PG_RETURN_IF_ERROR(submit_op(group, args, &work));
  const uint64_t handle = work_handles().insert(work);
  if (handle == 0) {
    group.detach(std::move(work));  // still left to us: it completes on its own
    return make_error(PG_ERR_OUT_OF_MEMORY, "too many unreleased works (call pg_work_release)");
  }
  *work_out = to_work_handle(handle);
  return ok_status();
}

}  // namespace procgroup::detail
