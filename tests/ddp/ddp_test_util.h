// Helpers for the ddp tests: ranks as threads of this process, each with its own
// procgroup::Group on an in-process backend and a private file store.
//
//   run_ranks(3, [](procgroup::Group& group, int rank) { ... EXPECT_...; });
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "procgroup/procgroup.hpp"
#include "subprocess.h"

namespace procgroup::ddp::testing {

struct RankOptions {
  std::string backend = "loopback";
  int64_t timeout_ms = 30000;
};

// An exception escaping body is a test failure naming the rank.
inline void run_ranks(int size, const std::function<void(Group&, int)>& body,
                      const RankOptions& options = {}) {
  procgroup::testing::TempDir dir;
  const std::string url = "file://" + dir.str();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
        o.rank = rank;
        o.size = size;
        o.backend = options.backend.c_str();
        o.store_url = url.c_str();
        o.timeout_ms = options.timeout_ms;
        Group group(o);
        body(group, rank);
        group.destroy();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << rank << ": " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace procgroup::ddp::testing
