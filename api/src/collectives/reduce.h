// Element-wise reduction kernels on CPU memory for every dtype (f16 and bf16 computed in
// float and rounded to nearest even), written so the compiler vectorises them.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "procgroup/procgroup.h"

namespace procgroup::detail {

// inout[i] = inout[i] op in[i]. AVG is treated as SUM (scale afterwards with scale_down).
// PG_ERR_INVALID_ARGUMENT for an invalid dtype or op.
Status reduce_into(void* inout, const void* in, uint64_t count, pg_dtype_t dtype,
                   pg_reduce_op_t op);

// data[i] /= divisor (floating: multiply by 1/divisor in the element's precision after
// float conversion; integers: truncating division, as NCCL does).
Status scale_down(void* data, uint64_t count, pg_dtype_t dtype, uint64_t divisor);

// Conversions used by the kernels and by tests.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace procgroup::detail
