// ddp's buckets on PROCGROUP_TIMELINE: each bucket is a "bucket" span from its last
// gradient's ready to done with a "comm" span from its launch, next to the allreduce it
// issued, on every rank's trace.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "ddp_test_util.h"
#include "procgroup/ddp/reducer.h"
#include "reducer_test_util.h"

namespace procgroup::ddp::testing {
namespace {

using nlohmann::json;

TEST(DdpTimeline, BucketsAppearAsReadyLaunchedDoneSpans) {
  procgroup::testing::TempDir dir;
  const std::string prefix = (dir.path() / "ddp").string();
  setenv("PROCGROUP_TIMELINE", prefix.c_str(), 1);
  run_ranks(2, [](Group& group, int rank) {
    FloatParams p({100, 100, 100});
    ReducerOptions o;
    o.first_bucket_bytes = 0;  // one bucket per parameter
    o.bucket_cap_bytes = 0;
    Reducer reducer(group, p.parameters(), o);
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k : {2, 1, 0}) {
        for (size_t i = 0; i < 100; ++i) p.grads[k][i] = grad_value(rank, k, i);
        reducer.mark_grad_ready(k);
      }
      reducer.finalize();
    }
  });
  unsetenv("PROCGROUP_TIMELINE");

  for (int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    std::ifstream in(prefix + ".rank" + std::to_string(rank) + ".json");
    ASSERT_TRUE(in.good());
    const json trace = json::parse(in);
    std::map<std::string, int> n;
    std::map<std::string, double> ts;  // the latest "name/ph/id" time
    for (const json& e : trace.at("traceEvents")) {
      if (e.at("ph") == "M") continue;
      const std::string key = e.at("cat").get<std::string>() + "/" +
                              e.at("name").get<std::string>() + "/" + e.at("ph").get<std::string>();
      ++n[key];
      if (e.at("cat") == "ddp") {
        EXPECT_EQ(e.at("args").at("bytes"), 400);
        ts[key + "/" + e.at("id").get<std::string>()] = e.at("ts").get<double>();
      }
    }
    EXPECT_EQ(n["ddp/bucket/b"], 6);  // 3 buckets x 2 passes
    EXPECT_EQ(n["ddp/bucket/e"], 6);
    EXPECT_EQ(n["ddp/comm/b"], 6);
    EXPECT_EQ(n["ddp/comm/e"], 6);
    EXPECT_EQ(n["op/allreduce/b"], 6);  // the buckets' own operations
    for (const char* id : {"0x0", "0x1", "0x2"}) {
      EXPECT_LE(ts.at(std::string("ddp/bucket/b/") + id), ts.at(std::string("ddp/comm/b/") + id));
      EXPECT_LE(ts.at(std::string("ddp/comm/b/") + id), ts.at(std::string("ddp/comm/e/") + id));
      EXPECT_LE(ts.at(std::string("ddp/comm/e/") + id), ts.at(std::string("ddp/bucket/e/") + id));
    }
  }
}

}  // namespace
}  // namespace procgroup::ddp::testing
