// The kernels as a plugin reaches them: the core's host services table (reduce, reduce_to,
// scale_down) through the kit's helpers (backend_kit/kernels.hpp), including an older core
// whose table ends before reduce_to, where the kit must give the same bytes through reduce.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/reduce.h"
#include "common/dtype.h"
#include "common/status.h"
#include "core/host_services.h"
#include "procgroup/backend_kit/kernels.hpp"
#include "test_data.h"

namespace procgroup::detail::testing {
namespace {

// The core's table as an older core (before reduce_to) hands it out, and one that has
// reduce_to's slot but leaves it NULL.
pg_host_services_t older_core() {
  pg_host_services_t host = *host_services();
  host.struct_size = offsetof(pg_host_services_t, reduce_to);
  host.reduce_to = nullptr;  // past struct_size: never read
  return host;
}

pg_host_services_t null_reduce_to() {
  pg_host_services_t host = *host_services();
  host.reduce_to = nullptr;
  return host;
}

TEST(HostKernels, TheCoreOffersReduceTo) {
  const pg_host_services_t* host = host_services();
  ASSERT_GE(host->struct_size, PG_HOST_SERVICES_REDUCE_TO_SIZE);
  ASSERT_NE(host->reduce_to, nullptr);
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, out[3] = {};
  ASSERT_EQ(host->reduce_to(host->ctx, out, a, b, 3, PG_DTYPE_F32, PG_REDUCE_SUM), PG_OK);
  EXPECT_EQ(out[0], 11.0f);
  EXPECT_EQ(out[2], 33.0f);
  // A bad call fails with the thread's message, as every host entry does.
  EXPECT_EQ(host->reduce_to(host->ctx, out, a, b, 3, PG_DTYPE_INVALID, PG_REDUCE_SUM),
            PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(last_error()).find("invalid dtype"), std::string::npos) << last_error();
  EXPECT_EQ(host->reduce_to(host->ctx, nullptr, a, b, 3, PG_DTYPE_F32, PG_REDUCE_SUM),
            PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(last_error()).find("null buffer"), std::string::npos) << last_error();
}

// Every dtype and op, counts that span several of the fallback's 16 KiB slices, and each
// aliasing: the kit over any table gives the bytes the kernel gives directly.
TEST(HostKernels, KitReduceToIsTheSameOnEveryTable) {
  const pg_host_services_t tables[] = {*host_services(), older_core(), null_reduce_to()};
  const char* names[] = {"current core", "older core", "NULL reduce_to"};
  for (pg_dtype_t dtype : kAllDtypes) {
    const size_t elem = dtype_size(dtype);
    for (pg_reduce_op_t op : kAllOps) {
      for (uint64_t count : {uint64_t{1}, uint64_t{17}, 16384 / elem + 3, uint64_t{20011}}) {
        const Bytes a = make_input(dtype, op, 0, count), b = make_input(dtype, op, 1, count);
        Bytes want(a.size());
        ASSERT_TRUE(reduce_to(want.data(), a.data(), b.data(), count, dtype, op).ok());
        for (size_t t = 0; t < 3; ++t) {
          const std::string what = describe(dtype, op) + " count " + std::to_string(count) +
                                   " on the " + names[t];
          Bytes out(a.size()), in_a = a, in_b = b;
          ASSERT_TRUE(kit::reduce_to(&tables[t], out.data(), a.data(), b.data(), count, dtype, op)
                          .ok()) << what;
          ASSERT_TRUE(
              kit::reduce_to(&tables[t], in_a.data(), in_a.data(), b.data(), count, dtype, op).ok());
          ASSERT_TRUE(
              kit::reduce_to(&tables[t], in_b.data(), a.data(), in_b.data(), count, dtype, op).ok());
          EXPECT_EQ(out, want) << what << " (third buffer)";
          EXPECT_EQ(in_a, want) << what << " (out == a)";
          EXPECT_EQ(in_b, want) << what << " (out == b)";
        }
      }
    }
  }
}

// The fallback keeps a on the left when out is b: min(+0, -0) stays +0 on an older core.
TEST(HostKernels, OlderCoreKeepsTheOperandOrder) {
  const pg_host_services_t host = older_core();
  std::vector<float> plus(9000, 0.0f), minus(9000, -0.0f);
  ASSERT_TRUE(kit::reduce_to(&host, minus.data(), plus.data(), minus.data(), minus.size(),
                             PG_DTYPE_F32, PG_REDUCE_MIN)
                  .ok());
  for (float v : minus) ASSERT_FALSE(std::signbit(v));
}

TEST(HostKernels, KitScaleDownDividesAndSkipsOne) {
  const pg_host_services_t* host = host_services();
  std::vector<int32_t> v = {7, -7, 8, 1};
  ASSERT_TRUE(kit::scale_down(host, v.data(), v.size(), PG_DTYPE_I32, 2).ok());
  EXPECT_EQ(v, (std::vector<int32_t>{3, -3, 4, 0}));
  pg_host_services_t none{};
  none.struct_size = sizeof(none);  // no kernels at all: a divisor of 1 never needs one
  EXPECT_TRUE(kit::scale_down(&none, v.data(), v.size(), PG_DTYPE_I32, 1).ok());
}

// A table without the kernels, or kernels that fail, give a status naming the kernel, the
// dtype, the op and the count; missing kernels write nothing.
TEST(HostKernels, MissingOrFailingKernelsAreNamed) {
  float a[2] = {1, 2}, b[2] = {3, 4}, out[2] = {5, 6};
  pg_host_services_t none{};
  none.struct_size = offsetof(pg_host_services_t, reduce);  // ends before reduce
  kit::Status st = kit::reduce_to(&none, out, a, b, 2, PG_DTYPE_F32, PG_REDUCE_MAX);
  EXPECT_EQ(st.code, PG_ERR_ABI_MISMATCH);
  EXPECT_NE(st.message.find("reduce kernel"), std::string::npos) << st.message;
  EXPECT_EQ(kit::reduce_to(nullptr, out, a, b, 2, PG_DTYPE_F32, PG_REDUCE_MAX).code,
            PG_ERR_ABI_MISMATCH);
  st = kit::scale_down(&none, out, 2, PG_DTYPE_F32, 4);
  EXPECT_EQ(st.code, PG_ERR_ABI_MISMATCH);
  EXPECT_NE(st.message.find("scale_down"), std::string::npos) << st.message;
  EXPECT_EQ(out[0], 5.0f);

  st = kit::reduce_to(host_services(), out, a, b, 2, PG_DTYPE_COUNT_, PG_REDUCE_MAX);
  EXPECT_EQ(st.code, PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message.find("reduce_to kernel failed (invalid max, 2 elements)"),
            std::string::npos)
      << st.message;
  const pg_host_services_t older = older_core();
  st = kit::reduce_to(&older, out, a, out, 2, PG_DTYPE_F32, PG_REDUCE_COUNT_);
  EXPECT_EQ(st.code, PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message.find("f32 invalid, 2 elements"), std::string::npos) << st.message;
  EXPECT_TRUE(kit::reduce_to(&none, nullptr, nullptr, nullptr, 0, PG_DTYPE_F32, PG_REDUCE_SUM).ok());
}

}  // namespace
}  // namespace procgroup::detail::testing
