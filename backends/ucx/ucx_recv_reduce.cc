// Receives that reduce while UCX unpacks them (see ucx_recv_reduce.h).
#include "ucx_recv_reduce.h"

#include <algorithm>
#include <cstring>

#include "procgroup/backend_kit/kernels.hpp"

namespace procgroup::ucx_backend {
namespace {

// Fragments may start anywhere in a transport buffer: misaligned input goes through an
// aligned bounce buffer in blocks of this many bytes, so the kernels see aligned operands.
constexpr size_t kBounce = 4096;

// dst[at..] = mine[at..] op received, unless an earlier fragment's kernel failed.
void reduce(ReduceInto& t, uint64_t at, const std::byte* received, size_t count) {
  if (!t.failure.ok()) return;
  Status st = kit::reduce_to(t.host, t.dst + at, t.mine + at, received, count, t.dtype, t.op);
  if (!st.ok()) t.failure = std::move(st);
}

void combine(ReduceInto& t, uint64_t at, const std::byte* received, size_t count) {
  if (reinterpret_cast<uintptr_t>(received) % t.es == 0) return reduce(t, at, received, count);
  alignas(64) std::byte bounce[kBounce];
  const size_t per = kBounce / t.es;
  for (size_t done = 0; done < count; done += per) {
    const size_t n = std::min(per, count - done);
    std::memcpy(bounce, received + done * t.es, n * t.es);
    reduce(t, at + done * t.es, bounce, n);
  }
}

// Bytes [from, to) of one element arrived; combine the element once all its bytes did.
void piece(ReduceInto& t, uint64_t from, uint64_t to, const std::byte* src) {
  const uint64_t element = from / t.es;
  auto it = std::find_if(t.split.begin(), t.split.end(),
                         [&](const ReduceInto::Split& s) { return s.element == element; });
  if (it == t.split.end()) {
    t.split.push_back(ReduceInto::Split{element, 0, {}});
    it = t.split.end() - 1;
  }
  std::memcpy(it->data + from % t.es, src, to - from);
  it->filled += to - from;
  if (it->filled == t.es) {
    reduce(t, element * t.es, it->data, 1);
    t.split.erase(it);
  }
}

void* start_pack(void*, const void*, size_t) { return nullptr; }  // never sent with

void* start_unpack(void*, void* buffer, size_t) {
  auto* t = static_cast<ReduceInto*>(buffer);
  t->split.clear();
  t->failure = {};
  return t;
}

size_t packed_size(void* state) { return static_cast<ReduceInto*>(state)->bytes; }

size_t pack(void*, size_t, void*, size_t) { return 0; }

ucs_status_t unpack(void* state, size_t offset, const void* data, size_t length) {
  auto& t = *static_cast<ReduceInto*>(state);
  if (offset + length > t.bytes) return UCS_ERR_MESSAGE_TRUNCATED;
  const auto* src = static_cast<const std::byte*>(data);
  uint64_t pos = offset;
  const uint64_t end = offset + length;
  if (pos % t.es != 0) {  // the rest of an element an earlier fragment began
    const uint64_t to = std::min(end, (pos / t.es + 1) * t.es);
    piece(t, pos, to, src);
    pos = to;
  }
  const uint64_t whole = (end - pos) / t.es;
  if (whole > 0) {
    combine(t, pos, src + (pos - offset), whole);
    pos += whole * t.es;
  }
  if (pos < end) piece(t, pos, end, src + (pos - offset));  // the start of a cut element
  return UCS_OK;
}

void finish(void*) {}

const ucp_generic_dt_ops_t kOps = {&start_pack, &start_unpack, &packed_size,
                                   &pack,       &unpack,       &finish};

}  // namespace

const ucp_generic_dt_ops_t& reduce_datatype_ops() { return kOps; }

Status make_reduce_datatype(ucp_datatype_t* out) {
  const ucs_status_t st = ucp_dt_create_generic(&kOps, nullptr, out);
  if (st != UCS_OK) {
    return Status::error(PG_ERR_BACKEND,
                         std::string("ucx: ucp_dt_create_generic: ") + ucs_status_string(st));
  }
  return {};
}

}  // namespace procgroup::ucx_backend
