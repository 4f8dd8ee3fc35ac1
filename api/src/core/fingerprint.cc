#include "core/fingerprint.h"

#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "common/dtype.h"
#include "core/backend_transport.h"
#include "core/group.h"
#include "procgroup/backend_kit/op_table.hpp"

namespace procgroup::detail {
namespace {

// One tag space for every fingerprint exchange, independent of seq: send/recv match in
// issue order, so ranks whose sequence numbers drifted apart still pair up and can say so.
constexpr uint64_t kFingerprintTags = PG_BACKEND_RESERVED_TAG_BASE + (uint64_t{1} << 61);

}  // namespace

Fingerprint fingerprint_of(const OpArgs& a, uint64_t seq) {
  const kit::OpInfo& info = kit::op_info(a.op);
  return Fingerprint{static_cast<int64_t>(seq),
                     a.op,
                     a.op == PG_OP_BARRIER ? -1 : a.dtype,
                     a.op == PG_OP_BARRIER ? -1 : static_cast<int64_t>(a.n),
                     info.rooted ? a.options.root : -1,
                     info.reducing ? a.options.reduce_op : -1,
                     a.device,
                     0};
}

std::string describe_call(const Fingerprint& f) {
  if (f.op == PG_OP_BARRIER) return "barrier()";
  std::string text = fmt::format("{}({}, {}", op_name(static_cast<pg_op_t>(f.op)),
                                 dtype_name(static_cast<pg_dtype_t>(f.dtype)), f.count);
  if (f.reduce_op >= 0) text += fmt::format(", {}", reduce_op_name(f.reduce_op));
  if (f.root >= 0) text += fmt::format(", root={}", f.root);
  if (f.device != PG_DEVICE_CPU) text += fmt::format(", {}", device_name(f.device));
  return text + ")";
}

// Every collective is checked, so the k-th exchange always pairs op #k of every rank: a
// rank that skipped or added a collective shows up as a different call at the same number.
Status compare_fingerprints(std::span<const Fingerprint> all) {
  const Fingerprint& first = all[0];
  for (size_t r = 1; r < all.size(); ++r) {
    const Fingerprint& f = all[r];
    if (std::memcmp(&f, &first, sizeof(Fingerprint)) == 0) continue;
    return make_error(PG_ERR_MISMATCH, "rank {} called {} as op #{} while rank 0 called {}", r,
                      describe_call(f), f.seq, describe_call(first));
  }
  return ok_status();
}

Status check_fingerprints(GroupState& group, const OpArgs& args, uint64_t seq,
                          Deadline deadline) {
  const Plugin& p = group.plugin();
  Fingerprint mine = fingerprint_of(args, seq);
  std::vector<Fingerprint> all(static_cast<size_t>(group.size()));
  if (!group.takes_cpu_buffers() || p.ops->send == nullptr || p.ops->recv == nullptr) {
    // No CPU send/recv to carry it (nccl takes device memory only): use the store.
    PG_RETURN_IF_ERROR(
        group
            .store_allgather("fingerprint", seq,
                             {reinterpret_cast<const uint8_t*>(&mine), sizeof(mine)},
                             {reinterpret_cast<uint8_t*>(all.data()), sizeof(mine) * all.size()},
                             deadline)
            .with_context("PROCGROUP_DEBUG=detail fingerprint check"));
    return compare_fingerprints(all);
  }
  BackendTransport transport(group, seq, deadline);
  CollectiveArgs c;
  c.input = &mine;
  c.output = all.data();
  c.count = sizeof(Fingerprint) / sizeof(int64_t);
  c.dtype = PG_DTYPE_I64;
  c.tag_base = kFingerprintTags;
  PG_RETURN_IF_ERROR(
      fallback_allgather(transport, c).with_context("PROCGROUP_DEBUG=detail fingerprint check"));
  return compare_fingerprints(all);
}

}  // namespace procgroup::detail
