// backend_kit/kernels.hpp — the core's reduction kernels as a plugin calls them: through the
// host services, so no plugin carries a copy (every dtype, vectorised, f16/bf16 rounded to
// nearest even). Part of procgroup_backend_kit.hpp. A plugin that calls these negotiates
// with host_size = kHostKernelsSize, which guarantees reduce and scale_down.
//
//   PG_KIT_TRY(kit::reduce_to(host, out, mine, theirs, n, PG_DTYPE_BF16, PG_REDUCE_SUM));
//   PG_KIT_TRY(kit::scale_down(host, out, n, PG_DTYPE_BF16, world_size));  // AVG's last step
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "procgroup/backend_kit/dtype.hpp"
#include "procgroup/backend_kit/status.hpp"
#include "procgroup/procgroup_backend.h"

namespace procgroup::kit {

namespace detail {
inline Status kernel_failed(pg_status_t code, const char* kernel, pg_dtype_t dtype,
                            pg_reduce_op_t op, uint64_t count) {
  return Status::error(code == PG_OK ? PG_ERR_BACKEND : code,
                       std::string("the host's ") + kernel + " kernel failed (" +
                           dtype_name(dtype) + " " + reduce_op_name(op) + ", " +
                           std::to_string(count) + " elements)");
}
}  // namespace detail

// out[i] = a[i] (op) b[i] for count elements of dtype on the CPU; out may be a or b, but must
// not overlap them otherwise. AVG reduces as SUM. host->reduce_to where the core has it;
// an older core's table ends before it, and host->reduce does the same with the same
// operand order (a copy first, or, when out is b, through a stack buffer in slices).
inline Status reduce_to(const pg_host_services_t* host, void* out, const void* a, const void* b,
                        uint64_t count, pg_dtype_t dtype, pg_reduce_op_t op) {
  if (count == 0) return {};
  if (reaches(host, PG_HOST_SERVICES_REDUCE_TO_SIZE) && host->reduce_to != nullptr) {
    const pg_status_t st = host->reduce_to(host->ctx, out, a, b, count, dtype, op);
    if (st == PG_OK) return {};
    return detail::kernel_failed(st, "reduce_to", dtype, op, count);
  }
  if (!reaches(host, offsetof(pg_host_services_t, reduce) + sizeof(host->reduce)) ||
      host->reduce == nullptr) {
    return detail::kernel_failed(PG_ERR_ABI_MISMATCH, "reduce", dtype, op, count);
  }
  const size_t es = dtype_size(dtype);
  if (es == 0) return detail::kernel_failed(PG_ERR_INVALID_ARGUMENT, "reduce", dtype, op, count);
  auto* o = static_cast<std::byte*>(out);
  const auto* x = static_cast<const std::byte*>(a);
  if (out != b) {
    if (out != a) std::memcpy(o, x, count * es);
    const pg_status_t st = host->reduce(host->ctx, out, b, count, dtype, op);
    if (st == PG_OK) return {};
    return detail::kernel_failed(st, "reduce", dtype, op, count);
  }
  alignas(64) std::byte slice[16384];  // out == b: keep b's slice, put a in its place
  const uint64_t per = sizeof(slice) / es;
  for (uint64_t done = 0; done < count; done += per) {
    const uint64_t n = std::min(per, count - done);
    std::memcpy(slice, o + done * es, n * es);
    std::memcpy(o + done * es, x + done * es, n * es);
    const pg_status_t st = host->reduce(host->ctx, o + done * es, slice, n, dtype, op);
    if (st != PG_OK) return detail::kernel_failed(st, "reduce", dtype, op, count);
  }
  return {};
}

// data[i] /= divisor: floats multiply by 1/divisor (f16/bf16 in float, then rounded),
// integers divide and truncate. A divisor of 1 is a no-op.
inline Status scale_down(const pg_host_services_t* host, void* data, uint64_t count,
                         pg_dtype_t dtype, uint64_t divisor) {
  if (count == 0 || divisor == 1) return {};
  if (!reaches(host, offsetof(pg_host_services_t, scale_down) + sizeof(host->scale_down)) ||
      host->scale_down == nullptr) {
    return detail::kernel_failed(PG_ERR_ABI_MISMATCH, "scale_down", dtype, PG_REDUCE_AVG, count);
  }
  const pg_status_t st = host->scale_down(host->ctx, data, count, dtype, divisor);
  if (st == PG_OK) return {};
  return detail::kernel_failed(st, "scale_down", dtype, PG_REDUCE_AVG, count);
}

}  // namespace procgroup::kit
