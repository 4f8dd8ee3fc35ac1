// data.h — deterministic benchmark data and its checker. Every rank fills its input from
// (rank, index, rep) alone and computes on the host what its output must hold, so no data is
// exchanged to check a result; every element is compared.
//
// Values are small integers, so sums, products, minima and maxima are exact in every dtype
// (bf16 included) for up to 120 ranks; avg on floating types allows one unit in the last
// place, since the division by n is rounded:
//
//   DataSpec spec{Coll::kAllreduce, Dtype::kF32, RedOp::kSum, /*root=*/0, rank, nranks, rep};
//   fill_input(spec, layout, send);
//   fill_expected(spec, layout, expected);
//   ... run the operation into recv ...
//   uint64_t wrong = output_checked(spec) ? count_wrong(spec, expected, recv, layout.recv_count) :
//   0;
#pragma once

#include <cstdint>

#include "bench_types.h"
#include "layout.h"

namespace procgroup::bench {

struct DataSpec {
  Coll op;
  Dtype dtype;
  RedOp redop;
  int root;
  int rank;
  int nranks;
  uint32_t rep;  // varies the data between sizes
};

// Writes this rank's input: layout.send_count elements.
void fill_input(const DataSpec& spec, const Layout& layout, void* input);

// Writes what this rank's output must hold: layout.recv_count elements.
void fill_expected(const DataSpec& spec, const Layout& layout, void* expected);

// Whether this rank's output is defined: only the root's for reduce and gather.
bool output_checked(const DataSpec& spec);

// How many of the count elements of got differ from expected.
uint64_t count_wrong(const DataSpec& spec, const void* expected, const void* got, uint64_t count);

// Fills bytes with 0xff: NaN for floating types, -1 or 255 for integers, which no valid
// result holds, so an output the operation never wrote is counted wrong.
void poison(void* data, uint64_t bytes);

// Test hook (--corrupt-rank): overwrites input element 0 with 127, a value the data never
// holds, so every output that element reaches comes out wrong (except under min).
void corrupt_first_element(Dtype dtype, void* input);

}  // namespace procgroup::bench
