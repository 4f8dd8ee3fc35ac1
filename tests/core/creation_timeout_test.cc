// A group creation that times out because ranks never started: rank 0's message names
// them as ranges with a count, however many there are, and comes within the timeout plus
// a moment (no store request per missing rank when none of the rest came).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "thread_group.h"

namespace pgtest {
namespace {

// Creates ranks `started` of a group of `size` as threads; returns rank 0's status and message.
std::pair<pg_status_t, std::string> create_some(int size, const std::vector<int>& started) {
  TempDir dir;
  const std::string url = "file://" + dir.path();
  std::pair<pg_status_t, std::string> rank0;
  std::vector<std::thread> threads;
  for (int rank : started) {
    threads.emplace_back([&, rank] {
      pg_group_options_t o = thread_rank_options(rank, size, "loopback", url.c_str(), 1000);
      pg_group_t group = nullptr;
      const pg_status_t status = pg_group_create(&o, &group);
      if (rank == 0) rank0 = {status, pg_last_error()};
      if (group != nullptr) pg_group_destroy(group);
    });
  }
  for (auto& t : threads) t.join();
  return rank0;
}

TEST(CreationTimeout, NamesAThousandMissingRanksAsOneRange) {
  const auto start = std::chrono::steady_clock::now();
  auto [status, message] = create_some(1000, {0});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(status, PG_ERR_TIMEOUT);
  EXPECT_NE(message.find("ranks 1-999 (999) never joined"), std::string::npos) << message;
  EXPECT_LT(took, std::chrono::milliseconds(1500));
}

TEST(CreationTimeout, NamesOnlyTheRanksThatDidNotCome) {
  auto [status, message] = create_some(5, {0, 2});
  EXPECT_EQ(status, PG_ERR_TIMEOUT);
  EXPECT_NE(message.find("ranks 1, 3-4 (3) never joined"), std::string::npos) << message;
}

}  // namespace
}  // namespace pgtest
