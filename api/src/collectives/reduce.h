// Element-wise reduction kernels on CPU memory for every dtype (f16 and bf16 computed in
// float and rounded to nearest even), vectorised, with AVX-512/AVX2 variants picked at load
// time. The only copy in the tree: plugins reach them through the host services
// (host->reduce, host->reduce_to, host->scale_down; see host_services.cc).
//
//   PG_RETURN_IF_ERROR(reduce_to(out, mine, theirs, n, PG_DTYPE_BF16, PG_REDUCE_SUM));
//   PG_RETURN_IF_ERROR(scale_down(out, n, PG_DTYPE_BF16, world_size));  // AVG's last step
#pragma once

#include <cstdint>

#include "common/status.h"
#include "procgroup/backend_kit/dtype.hpp"
#include "procgroup/procgroup.h"

namespace procgroup::detail {

// out[i] = a[i] op b[i]. out may be a or b, but must not overlap them otherwise. The order
// matters where the result depends on it (min/max of +0 and -0 keep a; NaN payloads): ranks
// that combine in the same order get bit-identical results. AVG is treated as SUM (scale
// afterwards with scale_down). PG_ERR_INVALID_ARGUMENT for an invalid dtype or op, or a
// null buffer with count > 0.
Status reduce_to(void* out, const void* a, const void* b, uint64_t count, pg_dtype_t dtype,
                 pg_reduce_op_t op);

// inout[i] = inout[i] op in[i]: reduce_to(inout, inout, in, ...).
Status reduce_into(void* inout, const void* in, uint64_t count, pg_dtype_t dtype,
                   pg_reduce_op_t op);

// data[i] /= divisor (floating: multiply by 1/divisor in the element's precision after
// float conversion; integers: truncating division, as NCCL does).
Status scale_down(void* data, uint64_t count, pg_dtype_t dtype, uint64_t divisor);

// The kit's conversions, which the kernels use (round to nearest even; NaN stays NaN).
using kit::bf16_to_float;
using kit::float_to_bf16;
using kit::float_to_half;
using kit::half_to_float;

}  // namespace procgroup::detail
