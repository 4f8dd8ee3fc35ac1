// Runs one function per rank, each on its own thread, with a group created through the
// public C ABI (libprocgroup) on an in-process backend and a private file store.
//
//   run_thread_ranks("loopback", 3, [](pg_group_t g, int rank) { ... EXPECT_...; });
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "procgroup/procgroup.h"

namespace pgtest {

// A fresh directory under TMPDIR, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pgtest-XXXXXX").string();
    path_ = mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct RankOptions {
  int64_t timeout_ms = 30000;
};

// Creates the group on every rank's thread, runs body, destroys the group. Creation and
// destruction failures are test failures.
inline void run_thread_ranks(const std::string& backend, int size,
                             const std::function<void(pg_group_t, int)>& body,
                             RankOptions options = {}) {
  TempDir dir;
  std::string url = "file://" + dir.path();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
      o.rank = rank;
      o.size = size;
      o.backend = backend.c_str();
      o.store_url = url.c_str();
      o.timeout_ms = options.timeout_ms;
      pg_group_t group = nullptr;
      pg_status_t s = pg_group_create(&o, &group);
      ASSERT_EQ(s, PG_OK) << "rank " << rank << ": " << pg_last_error();
      body(group, rank);
      // A body that aborted the group may see its destroy report the failure.
      pg_group_destroy(group);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace pgtest
