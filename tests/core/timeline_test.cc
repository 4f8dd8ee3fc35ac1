// PROCGROUP_TIMELINE through the public API with thread ranks: each rank's file is a valid
// Chrome trace with an issue/start/end set per operation and the caller's marks; and the
// log settings (PROCGROUP_LOG_LEVEL, PROCGROUP_DEBUG) are parsed alike: any case, and an
// unknown value is PG_ERR_CONFIG at group creation.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "thread_group.h"

namespace pgtest {
namespace {

using nlohmann::json;

json read_trace(const std::filesystem::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << file;
  return json::parse(in);  // throws, failing the test, if it is not JSON
}

// "b"/"e" counts per (cat, name) among the trace's async events.
std::map<std::string, int> count_phases(const json& trace) {
  std::map<std::string, int> counts;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M") continue;
    counts[e.at("cat").get<std::string>() + "/" + e.at("name").get<std::string>() + "/" +
           e.at("ph").get<std::string>()]++;
  }
  return counts;
}

class TimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = (std::filesystem::path(dir_.path()) / "run").string();
    setenv("PROCGROUP_TIMELINE", prefix_.c_str(), 1);
  }
  void TearDown() override { unsetenv("PROCGROUP_TIMELINE"); }
  std::filesystem::path file(int rank) const {
    return prefix_ + ".rank" + std::to_string(rank) + ".json";
  }

  TempDir dir_;
  std::string prefix_;
};

TEST_F(TimelineTest, EachRankWritesOneIssueStartEndSetPerOperation) {
  run_thread_ranks("loopback", 2, [](pg_group_t g, int rank) {
    float x[4] = {1, 2, 3, 4};
    pg_buffer_t b = pg_buffer_cpu(x, 4, PG_DTYPE_F32);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(pg_allreduce(g, nullptr, &b, nullptr, nullptr), PG_OK);
    ASSERT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK);
    pg_work_t w = nullptr;
    ASSERT_EQ(pg_broadcast(g, nullptr, &b, nullptr, &w), PG_OK);
    ASSERT_EQ(pg_work_wait(w, -1), PG_OK);
    pg_work_release(w);
    ASSERT_EQ(pg_timeline_mark(g, "user", "step", 7, PG_TIMELINE_BEGIN, 123), PG_OK);
    ASSERT_EQ(pg_timeline_mark(g, "user", "step", 7, PG_TIMELINE_END, 123), PG_OK);
    (void)rank;
  });
  for (int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_TRUE(std::filesystem::exists(file(rank)));
    const json trace = read_trace(file(rank));
    const std::map<std::string, int> n = count_phases(trace);
    EXPECT_EQ(n.at("op/allreduce/b"), 3);
    EXPECT_EQ(n.at("op/allreduce/e"), 3);
    EXPECT_EQ(n.at("op/barrier/b"), 1);
    EXPECT_EQ(n.at("op/broadcast/e"), 1);
    EXPECT_EQ(n.at("op/running/b"), 5);  // start
    EXPECT_EQ(n.at("op/running/e"), 5);  // end
    EXPECT_EQ(n.at("user/step/b"), 1);
    EXPECT_EQ(n.at("user/step/e"), 1);
    EXPECT_EQ(trace.at("otherData").at("dropped"), 0);
    uint64_t seq = 0;
    double last_issue = 0;
    for (const json& e : trace.at("traceEvents")) {
      EXPECT_EQ(e.at("pid"), rank);  // pid = rank: the ranks' files merge
      if (e.at("ph") == "M") continue;
      EXPECT_TRUE(e.at("ts").is_number());
      EXPECT_TRUE(e.contains("tid") && e.contains("id"));
      if (e.at("cat") == "op" && e.at("ph") == "b" && e.at("name") != "running") {
        EXPECT_EQ(e.at("args").at("seq").get<uint64_t>(), ++seq);  // issue order
        EXPECT_GE(e.at("ts").get<double>(), last_issue);
        last_issue = e.at("ts").get<double>();
        EXPECT_EQ(e.at("args").at("bytes"), e.at("name") == "barrier" ? 0 : 16);
      }
      if (e.at("cat") == "op" && e.at("ph") == "e" && e.at("name") != "running") {
        EXPECT_EQ(e.at("args").at("status"), "PG_OK");
      }
      if (e.at("cat") == "user") {
        EXPECT_EQ(e.at("args").at("bytes"), 123);
      }
    }
    EXPECT_EQ(seq, 5u);
  }
}

TEST_F(TimelineTest, NamesAreEscapedAndMarksAreChecked) {
  run_thread_ranks("loopback_p2p", 1, [](pg_group_t g, int) {
    EXPECT_EQ(pg_timeline_mark(g, "c\"at", "a\\b\n\x01\xff", 1, PG_TIMELINE_INSTANT, 0), PG_OK);
    EXPECT_EQ(pg_timeline_mark(g, "user", "x", 1, 3, 0), PG_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(pg_last_error()).find("phase 3"), std::string::npos) << pg_last_error();
    EXPECT_EQ(pg_timeline_mark(g, "user", nullptr, 1, PG_TIMELINE_BEGIN, 0),
              PG_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(pg_timeline_mark(nullptr, "user", "x", 1, PG_TIMELINE_BEGIN, 0),
              PG_ERR_INVALID_ARGUMENT);
  });
  const json trace = read_trace(file(0));
  int instants = 0;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "n") continue;
    ++instants;
    EXPECT_EQ(e.at("cat"), "c\"at");
    EXPECT_EQ(e.at("name"), "a\\b\n\x01\xc3\xbf");  // \u00ff: bytes beyond ASCII as code points
  }
  EXPECT_EQ(instants, 1);
}

TEST(TimelineOff, MarksSucceedAndNoFileIsWritten) {
  unsetenv("PROCGROUP_TIMELINE");
  TempDir cwd;
  const auto before = std::filesystem::current_path();
  std::filesystem::current_path(cwd.path());
  run_thread_ranks("loopback", 1, [](pg_group_t g, int) {
    EXPECT_EQ(pg_timeline_mark(g, "user", "x", 1, PG_TIMELINE_BEGIN, 0), PG_OK);
    EXPECT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK);
  });
  std::filesystem::current_path(before);
  EXPECT_TRUE(std::filesystem::is_empty(cwd.path()));
}

pg_status_t create_alone() {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.size = 1;
  o.backend = "loopback";
  pg_group_t g = nullptr;
  pg_status_t s = pg_group_create(&o, &g);
  if (s == PG_OK) pg_group_destroy(g);
  return s;
}

TEST(TimelineUnwritable, IsAConfigErrorAtGroupCreation) {
  TempDir dir;
  const std::string prefix = dir.path() + "/no/such/dir/run";
  setenv("PROCGROUP_TIMELINE", prefix.c_str(), 1);
  EXPECT_EQ(create_alone(), PG_ERR_CONFIG);
  EXPECT_NE(std::string(pg_last_error())
                .find("PROCGROUP_TIMELINE: cannot write " + prefix + ".rank0.json: No such file"),
            std::string::npos)
      << pg_last_error();
  unsetenv("PROCGROUP_TIMELINE");
}

TEST(LogSettings, LogLevelIsCaseInsensitive) {
  for (const char* value : {"DEBUG", "Info", "warn", "ERROR"}) {
    setenv("PROCGROUP_LOG_LEVEL", value, 1);
    EXPECT_EQ(create_alone(), PG_OK) << value << ": " << pg_last_error();
  }
  unsetenv("PROCGROUP_LOG_LEVEL");
}

TEST(LogSettings, UnknownLogLevelIsAConfigError) {
  for (const char* value : {"verbose", "trace", "3", "debug "}) {
    setenv("PROCGROUP_LOG_LEVEL", value, 1);
    EXPECT_EQ(create_alone(), PG_ERR_CONFIG) << value;
    EXPECT_NE(std::string(pg_last_error())
                  .find(std::string("PROCGROUP_LOG_LEVEL='") + value +
                        "' is not one of: error, warn, info, debug"),
              std::string::npos)
        << pg_last_error();
  }
  unsetenv("PROCGROUP_LOG_LEVEL");
}

TEST(LogSettings, AHugeLogLevelIsQuotedCutShort) {
  const std::string value(100000, 'x');
  setenv("PROCGROUP_LOG_LEVEL", value.c_str(), 1);
  EXPECT_EQ(create_alone(), PG_ERR_CONFIG);
  const std::string message = pg_last_error();
  EXPECT_LT(message.size(), 1000u) << message.size();
  EXPECT_NE(message.find("(100000 bytes) is not one of"), std::string::npos) << message;
  unsetenv("PROCGROUP_LOG_LEVEL");
}

TEST(LogSettings, DebugSettingIsCaseInsensitiveToo) {
  setenv("PROCGROUP_DEBUG", "DETAIL", 1);
  EXPECT_EQ(create_alone(), PG_OK) << pg_last_error();
  setenv("PROCGROUP_DEBUG", "Off", 1);
  EXPECT_EQ(create_alone(), PG_OK) << pg_last_error();
  unsetenv("PROCGROUP_DEBUG");
}

}  // namespace
}  // namespace pgtest
