// The hang report's messages at a size where listing every rank would not do: ranks are
// named as ranges, at most eight of them, with a count, and a rank that simply did not
// arrive brings no hint about ranks passing different counts.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "thread_group.h"

namespace pgtest {
namespace {

// Eight ranges, then the rest counted: "ranks 1, 3, ..., 15 and 2 more (10)". (Loose on
// which ranks: on a loaded machine an even rank may report after the others looked.)
const std::string kBoundedList = R"(ranks (\d+(-\d+)?, ){7}\d+(-\d+)? and \d+ more \(\d+\))";

TEST(HangReportRanks, ManyMissingRanksAreNamedAsABoundedListWithACount) {
  RankOptions options;
  options.timeout_ms = 1000;
  ::testing::internal::CaptureStderr();
  run_thread_ranks(
      "loopback", 20,
      [](pg_group_t g, int rank) {
        float x = 1;
        pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
        ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
        if (rank % 2 == 1) {  // the odd ranks never join the second allreduce
          std::this_thread::sleep_for(std::chrono::milliseconds(2500));
          return;
        }
        EXPECT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_ERR_TIMEOUT);
        const std::string message = pg_last_error();
        EXPECT_TRUE(std::regex_search(message, std::regex("not heard from: " + kBoundedList +
                                                          " \\(stuck, stopped or gone\\)")))
            << message;
        EXPECT_EQ(message.find("different counts"), std::string::npos) << message;
      },
      options);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(std::regex_search(log, std::regex("hang summary: " + kBoundedList +
                                                " are in allreduce #2 \\(f32 x 1, sum\\); " +
                                                kBoundedList + " did not report")))
      << log;
}

// Two ranks inside the same operation with different counts, a third not arriving: the
// evidence for the hint is there, and the message gives it.
TEST(HangReportRanks, RanksAtTheSameOperationWithOtherCountsGetTheHint) {
  RankOptions options;
  options.timeout_ms = 1000;
  ::testing::internal::CaptureStderr();
  run_thread_ranks(
      "loopback", 3,
      [](pg_group_t g, int rank) {
        float x[2] = {1, 1};
        pg_buffer_t b = pg_buffer_cpu(x, rank == 1 ? 2 : 1, PG_DTYPE_F32);
        if (rank == 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2500));
          return;
        }
        EXPECT_NE(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK);
        const std::string message = pg_last_error();
        EXPECT_NE(message.find("not heard from: rank 2"), std::string::npos) << message;
        EXPECT_NE(message.find("ranks that pass different counts"), std::string::npos) << message;
      },
      options);
  (void)::testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace pgtest
