// PROCGROUP_LOG_LEVEL=debug logs every operation (op, seq, bytes, status, time) on lines that
// carry a UTC timestamp, the pid and the rank. Alone in its binary: the log reads its level
// once per process, so this must be set before the library logs anything.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "procgroup/procgroup.h"

namespace {

TEST(DebugLog, EveryOperationIsLoggedWithTimeAndRank) {
  setenv("PROCGROUP_LOG_LEVEL", "DEBUG", 1);
  ::testing::internal::CaptureStderr();
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.rank = 0;
  o.size = 1;
  o.backend = "loopback";
  pg_group_t g = nullptr;
  ASSERT_EQ(pg_group_create(&o, &g), PG_OK) << pg_last_error();
  double x[3] = {1, 2, 3};
  pg_buffer_t b = pg_buffer_cpu(x, 3, PG_DTYPE_F64);
  ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK);
  ASSERT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK);
  ASSERT_EQ(pg_group_destroy(g), PG_OK);
  const std::string log = ::testing::internal::GetCapturedStderr();
  unsetenv("PROCGROUP_LOG_LEVEL");

  const std::string prefix = R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z procgroup\[\d+\] rank 0 )";
  const std::regex allreduce(prefix +
                             R"(debug op: group '.+' allreduce seq 1 24 bytes PG_OK in \d+ us)");
  const std::regex barrier(prefix +
                           R"(debug op: group '.+' barrier seq 2 0 bytes PG_OK in \d+ us)");
  const std::regex loaded(prefix + R"(info loader: backend 'loopback' .* loaded from /.+)");
  int allreduces = 0, barriers = 0, loads = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    allreduces += std::regex_match(line, allreduce);
    barriers += std::regex_match(line, barrier);
    loads += std::regex_match(line, loaded);
  }
  EXPECT_EQ(allreduces, 1) << log;
  EXPECT_EQ(barriers, 1) << log;
  EXPECT_EQ(loads, 1) << log;  // 14.12: which file was loaded, at info level
}

}  // namespace
