// Ranks as threads of this process, each with a group created through the public C ABI on
// an in-process backend and a private file store.
//
//   run_thread_ranks("loopback", 3, [](pg_group_t g, int rank) { ... EXPECT_...; });
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "procgroup/procgroup.h"

// The in-process backends a parameterised test runs on: loopback, and gloo where the
// build has it (thread_rank_backends() in CMakeLists.txt defines PGTEST_WITH_GLOO).
#ifdef PGTEST_WITH_GLOO
#define PGTEST_THREAD_BACKENDS ::testing::Values("loopback", "gloo")
#else
#define PGTEST_THREAD_BACKENDS ::testing::Values("loopback")
#endif

namespace pgtest {

// A fresh directory under TMPDIR, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pgcore-XXXXXX").string();
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
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

// The options of one thread rank of `size` meeting through store_url (both strings must
// outlive the group's creation).
inline pg_group_options_t thread_rank_options(int rank, int size, const char* backend,
                                              const char* store_url, int64_t timeout_ms) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.rank = rank;
  o.size = size;
  o.backend = backend;
  o.store_url = store_url;
  o.timeout_ms = timeout_ms;
  return o;
}

inline void run_thread_ranks(const std::string& backend, int size,
                             const std::function<void(pg_group_t, int)>& body,
                             RankOptions options = {}) {
  TempDir dir;
  const std::string url = "file://" + dir.path();
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(size));
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      pg_group_options_t o = thread_rank_options(rank, size, backend.c_str(), url.c_str(),
                                                  options.timeout_ms);
      pg_group_t group = nullptr;
      ASSERT_EQ(pg_group_create(&o, &group), PG_OK) << "rank " << rank << ": " << pg_last_error();
      body(group, rank);
      pg_group_destroy(group);  // may report the failure a body provoked
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace pgtest
