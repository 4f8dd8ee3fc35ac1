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

struct Outcome {
  pg_status_t status = PG_OK;
  std::string message;
  std::chrono::steady_clock::duration took{};
};

// Creates ranks `started` of a group of `size` as threads (1 s timeout); returns each
// started rank's outcome, in the order of `started`.
std::vector<Outcome> create_each(int size, const std::vector<int>& started) {
  TempDir dir;
  const std::string url = "file://" + dir.path();
  std::vector<Outcome> outcomes(started.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < started.size(); ++i) {
    threads.emplace_back([&, i] {
      pg_group_options_t o = thread_rank_options(started[i], size, "loopback", url.c_str(), 1000);
      pg_group_t group = nullptr;
      const auto start = std::chrono::steady_clock::now();
      const pg_status_t status = pg_group_create(&o, &group);
      outcomes[i] = {status, pg_last_error(), std::chrono::steady_clock::now() - start};
      if (group != nullptr) pg_group_destroy(group);
    });
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

// Rank 0's status and message (rank 0 must be the first of `started`).
std::pair<pg_status_t, std::string> create_some(int size, const std::vector<int>& started) {
  Outcome rank0 = create_each(size, started)[0];
  return {rank0.status, rank0.message};
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

// The ranks that came learn rank 0's reason at once, rather than when rank 0 (which may
// host the store) is gone: for a TCP store that was one more timeout of reconnecting.
TEST(CreationTimeout, TheRanksThatCameFailWithRankZerosWordsInTime) {
  std::vector<Outcome> outcomes = create_each(1000, {0, 1});
  for (const Outcome& o : outcomes) {
    EXPECT_EQ(o.status, PG_ERR_TIMEOUT) << o.message;
    EXPECT_NE(o.message.find("ranks 2-999 (998) never joined"), std::string::npos) << o.message;
    EXPECT_LT(o.took, std::chrono::milliseconds(1500)) << o.message;
  }
}

}  // namespace
}  // namespace pgtest
