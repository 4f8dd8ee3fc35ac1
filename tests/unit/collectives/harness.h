// Running a collective on every rank of a ThreadWorld and comparing buffers, for the
// collectives' tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "common/dtype.h"
#include "test_data.h"
#include "thread_transport.h"

namespace procgroup::detail::testing {

// Generous: a correct run never waits this long, and a broken one still ends.
inline constexpr std::chrono::milliseconds kTimeout{30000};
inline constexpr int kWorldSizes[] = {1, 2, 3, 4, 5, 6, 8};
inline constexpr uint64_t kCounts[] = {0, 1, 7, 1000};

// Runs fn(transport) on every rank of a fresh world of `size`; every rank must succeed.
// Also checks that no message was left unreceived (all sends matched).
inline void run_all_ok(int size, const std::function<Status(Transport&)>& fn,
                       const std::string& what) {
  ThreadWorld world(size, kTimeout);
  const std::vector<Status> results = world.run(fn);
  for (int r = 0; r < size; ++r) {
    EXPECT_TRUE(results[static_cast<size_t>(r)].ok())
        << what << ": rank " << r << ": " << results[static_cast<size_t>(r)].to_string();
  }
  EXPECT_EQ(world.unreceived_messages(), 0u) << what;
}

// gtest-friendly comparison of two byte buffers holding `dtype` elements: reports the
// first differing element.
inline ::testing::AssertionResult same_bytes(pg_dtype_t dtype, const Bytes& expected,
                                             const Bytes& actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << expected.size() << " vs " << actual.size();
  }
  const size_t elem = dtype_size(dtype);
  for (size_t i = 0; i < expected.size(); i += elem) {
    if (std::memcmp(&expected[i], &actual[i], elem) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i / elem << " of " << expected.size() / elem << ": expected "
             << load(dtype, expected.data(), i / elem) << ", got "
             << load(dtype, actual.data(), i / elem);
    }
  }
  return ::testing::AssertionSuccess();
}

// A recognisable filler for outputs, so an element never written shows up.
inline Bytes garbage(size_t bytes) { return Bytes(bytes, 0xA5); }

// Forms of passing buffers: out of place, in place with a null input, and in place with
// input == the in-place address.
enum class Form { kOutOfPlace, kInPlaceNull, kInPlaceSame };
inline constexpr Form kAllForms[] = {Form::kOutOfPlace, Form::kInPlaceNull, Form::kInPlaceSame};
inline const char* form_name(Form f) {
  switch (f) {
    case Form::kOutOfPlace: return "out-of-place";
    case Form::kInPlaceNull: return "in-place(null input)";
    case Form::kInPlaceSame: return "in-place(input==output)";
  }
  return "?";
}

}  // namespace procgroup::detail::testing
