// ucx_reduce.h — dtypes and the reduction kernels of the ucx backend.
//
// The collectives fuse the copy into the reduction (out = a op b, so an out-of-place
// allreduce never copies its input first). Every dtype is vectorised: the kernels are
// compiled for x86-64-v4, -v3 and baseline and picked at load time; f16 and bf16 widen to
// float, operate and round to nearest even.
//
//   reduce(out, mine, received, count, PG_DTYPE_BF16, PG_REDUCE_SUM);  // out may be mine
//   scale_down(out, count, PG_DTYPE_F32, world_size);                  // AVG's last step
#ifndef PROCGROUP_BACKENDS_UCX_UCX_REDUCE_H_
#define PROCGROUP_BACKENDS_UCX_UCX_REDUCE_H_

#include <cstddef>
#include <cstdint>

#include "procgroup/procgroup_backend.h"

namespace procgroup::ucx_backend {

// Bytes per element; 0 for an invalid dtype.
size_t dtype_size(pg_dtype_t dtype);
// "f32", "bf16", ...; "invalid" for anything else.
const char* dtype_name(pg_dtype_t dtype);
// "sum", "max", ...; "invalid" for anything else.
const char* reduce_op_name(pg_reduce_op_t op);

// out[i] = a[i] op b[i] for i < count. out may equal a or b (not overlap them otherwise).
// AVG reduces as SUM. dtype and op must be valid (validated when the op was issued).
void reduce(void* out, const void* a, const void* b, size_t count, pg_dtype_t dtype,
            pg_reduce_op_t op);

// data[i] = data[i] / divisor: floats multiply by the reciprocal (f16/bf16 in float, then
// rounded), integers divide and truncate, as NCCL and the core's host kernels do.
void scale_down(void* data, size_t count, pg_dtype_t dtype, uint64_t divisor);

// Conversions (round to nearest even; NaN stays NaN), exposed for tests.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace procgroup::ucx_backend

#endif  // PROCGROUP_BACKENDS_UCX_UCX_REDUCE_H_
