// gloo_dtype.h — element sizes, names and reduction kernels for the gloo backend.
//
// Gloo's collectives move bytes and call a type-erased reduction function
// `fn(out, a, b, n)` (out[i] = a[i] op b[i]); this file picks that function for every
// procgroup dtype and reduce op:
//
//   ReduceFn fn = reduce_function(PG_DTYPE_BF16, PG_REDUCE_MAX);  // never null for valid input
//   fn(out, a, b, n);
//
// f32/f64/i8/u8/i32/i64 use gloo's own templates (gloo/math.h); f16 uses gloo::float16
// (convert to float, operate, round to nearest even); bf16 has its own kernels with the
// same float round trip. AVG reduces as SUM: the caller divides afterwards.
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_DTYPE_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_DTYPE_H_

#include <cstddef>
#include <cstdint>

#include "procgroup/procgroup_backend.h"

namespace procgroup::gloo_backend {

// out[i] = a[i] op b[i] for i < n; out may alias a or b.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);

// Bytes per element; 0 for an invalid dtype.
size_t dtype_size(pg_dtype_t dtype);

// "f32", "bf16", ...; "invalid" for anything else.
const char* dtype_name(pg_dtype_t dtype);

// "sum", "avg", ...; "invalid" for anything else.
const char* reduce_op_name(pg_reduce_op_t op);

// The kernel for (dtype, op); AVG gives SUM's kernel. nullptr when either is invalid.
ReduceFn reduce_function(pg_dtype_t dtype, pg_reduce_op_t op);

// bfloat16 <-> float; float_to_bf16 rounds to nearest even and keeps NaN a (quiet) NaN.
float bf16_to_float(uint16_t value);
uint16_t float_to_bf16(float value);

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_DTYPE_H_
