// gloo_dtype.h — element sizes, names and reduction kernels for the gloo backend.
//
// Gloo's collectives move bytes and call a type-erased reduction function
// `fn(out, a, b, n)` (out[i] = a[i] op b[i]); this file picks that function for every
// procgroup dtype and reduce op:
//
//   ReduceFn fn = reduce_function(PG_DTYPE_BF16, PG_REDUCE_MAX);  // never null for valid input
//   fn(out, a, b, n);
//
// f32/f64/i8/u8/i32/i64 use gloo's own templates (gloo/math.h); f16 and bf16 convert to
// float, operate and round to nearest even (the kit's converters). AVG reduces as SUM: the
// caller divides afterwards.
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_DTYPE_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_DTYPE_H_

#include <cstddef>
#include <cstdint>

#include "procgroup/backend_kit/dtype.hpp"
#include "procgroup/procgroup_backend.h"

namespace procgroup::gloo_backend {

// out[i] = a[i] op b[i] for i < n; out may alias a or b.
using ReduceFn = void (*)(void* out, const void* a, const void* b, size_t n);

// Sizes and names: the kit's (procgroup/backend_kit/dtype.hpp).
using kit::dtype_name;
using kit::dtype_size;
using kit::reduce_op_name;

// The kernel for (dtype, op); AVG gives SUM's kernel. nullptr when either is invalid.
ReduceFn reduce_function(pg_dtype_t dtype, pg_reduce_op_t op);

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_DTYPE_H_
