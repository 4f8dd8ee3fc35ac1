// host_math.h — element arithmetic the benchmarks do on the host: 16-bit float conversions,
// a reduction kernel for every (dtype, op), and the division that turns a sum into an
// average. The MPI tool uses them for the types and ops MPI lacks (f16, bf16, avg), the raw
// Gloo path for bf16 and avg, the checker to decode values.
//
//   uint16_t h = float_to_half(3.0f);                       // round to nearest even
//   reduce_into(Dtype::kBf16, RedOp::kMax, inout, in, n);   // inout[i] = max(inout[i], in[i])
//   scale_down(Dtype::kI32, data, n, 4);                    // data[i] /= 4 (truncating)
#pragma once

#include <cstdint>

#include "bench_types.h"
#include "procgroup/backend_kit/dtype.hpp"

namespace procgroup::bench {

// The 16-bit conversions are the one copy in procgroup/backend_kit/dtype.hpp.
using kit::bf16_to_float;
using kit::float_to_bf16;
using kit::float_to_half;
using kit::half_to_float;

// inout[i] = inout[i] op in[i] for i < count; avg reduces as sum. f16/bf16 go through float
// and round to nearest even after every step.
void reduce_into(Dtype dtype, RedOp op, void* inout, const void* in, uint64_t count);

// data[i] /= divisor: floating types multiply by 1/divisor (as procgroup's core does),
// integers divide with truncation.
void scale_down(Dtype dtype, void* data, uint64_t count, uint64_t divisor);

// The element at index i as a double (for tolerant comparisons and messages).
double load_as_double(Dtype dtype, const void* data, uint64_t i);
// Stores an integer-valued v at index i (exact for the small values the benchmarks use).
void store_integer(Dtype dtype, void* data, uint64_t i, int64_t v);

}  // namespace procgroup::bench
