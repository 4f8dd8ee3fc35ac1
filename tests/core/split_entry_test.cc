// pg_group_split through a backend's optional group_split entry, on the split probe plugin
// (split_probe.h: loopback, every create and split call recorded). With the entry, every
// parent rank must call it, a PG_SPLIT_NO_COLOR rank too (with no config), on its parent's
// handle, with the child's config; a version-1 table (no entry) still splits through
// group_create, and the core never reads the entry from beyond its struct_size.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "split_probe.h"
#include "thread_group.h"

namespace pgtest {
namespace {

constexpr int kWorld = 4;
// Short, so that a core that leaves a rank out fails in seconds, not minutes.
constexpr int64_t kTimeoutMs = 10000;
constexpr RankOptions kRanks{kTimeoutMs};

// The probe's records, read through the same library the core loaded.
class Probe {
 public:
  explicit Probe(const char* path) : handle_(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ != nullptr)
      take_ = reinterpret_cast<pgtest_split_probe_take_fn>(
          dlsym(handle_, PGTEST_SPLIT_PROBE_TAKE_SYMBOL));
  }
  ~Probe() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;
  bool ok() const { return take_ != nullptr; }
  // The records since the last take, split by entry.
  void take(std::vector<pgtest_split_call_t>* creates, std::vector<pgtest_split_call_t>* splits) {
    std::vector<pgtest_split_call_t> all(256);
    all.resize(std::min(take_(all.data(), all.size()), all.size()));
    for (const auto& c : all) (c.entry == 'c' ? creates : splits)->push_back(c);
  }

 private:
  void* handle_;
  pgtest_split_probe_take_fn take_ = nullptr;
};

// 4 ranks: 0 and 2 get color 1 (key -rank, so rank 2 comes first), 1 alone gets color 0,
// 3 opts out. world rank -> (child rank, child size).
int32_t color_of(int rank) { return rank == 3 ? PG_SPLIT_NO_COLOR : rank % 2 == 0 ? 1 : 0; }
const std::map<int, std::pair<int, int>> kChildOf = {{0, {1, 2}}, {1, {0, 1}}, {2, {0, 2}}};

// Splits g as above and checks the child's rank, size, members and an allreduce in it.
void split_and_use(pg_group_t g, int rank) {
  pg_group_t sub = nullptr;
  ASSERT_EQ(pg_group_split(g, color_of(rank), -rank, &sub), PG_OK) << pg_last_error();
  if (rank == 3) {
    EXPECT_EQ(sub, nullptr);
    return;
  }
  ASSERT_NE(sub, nullptr);
  int32_t sub_rank = -1, sub_size = -1;
  pg_group_rank(sub, &sub_rank);
  pg_group_size(sub, &sub_size);
  EXPECT_EQ(std::make_pair(int{sub_rank}, int{sub_size}), kChildOf.at(rank));
  int32_t mine = rank, members[2] = {-1, -1};
  pg_buffer_t in = pg_buffer_cpu(&mine, 1, PG_DTYPE_I32);
  pg_buffer_t all = pg_buffer_cpu(members, static_cast<uint64_t>(sub_size), PG_DTYPE_I32);
  EXPECT_EQ(pg_allgather(sub, &in, &all, nullptr, nullptr), PG_OK) << pg_last_error();
  if (color_of(rank) == 1) {
    EXPECT_TRUE(members[0] == 2 && members[1] == 0);
  }
  int64_t sum = rank;
  pg_buffer_t b = pg_buffer_cpu(&sum, 1, PG_DTYPE_I64);
  EXPECT_EQ(pg_allreduce(sub, nullptr, &b, nullptr, nullptr), PG_OK) << pg_last_error();
  EXPECT_EQ(sum, color_of(rank) == 1 ? 0 + 2 : 1);
  EXPECT_EQ(pg_group_destroy(sub), PG_OK) << pg_last_error();
}

// The world group's create record of each rank.
std::map<int, pgtest_split_call_t> by_rank(const std::vector<pgtest_split_call_t>& creates) {
  std::map<int, pgtest_split_call_t> world;
  for (const auto& c : creates)
    if (c.made.size == kWorld) world[c.made.rank] = c;
  return world;
}

class SplitEntry : public ::testing::Test {
 protected:
  Probe probe_{PG_SPLIT_PROBE_PATH};
  Probe probe_v1_{PG_SPLIT_PROBE_V1_PATH};
  std::vector<pgtest_split_call_t> creates_, splits_;
};

TEST_F(SplitEntry, EveryParentRankCallsItWithTheChildsConfig) {
  ASSERT_TRUE(probe_.ok()) << dlerror();
  run_thread_ranks(PG_SPLIT_PROBE_PATH, kWorld, split_and_use, kRanks);
  probe_.take(&creates_, &splits_);
  ASSERT_EQ(creates_.size(), size_t{kWorld}) << "children must not come from group_create";
  const std::map<int, pgtest_split_call_t> world = by_rank(creates_);
  ASSERT_EQ(world.size(), size_t{kWorld});
  const std::string world_id = world.at(0).made.id;
  ASSERT_EQ(splits_.size(), size_t{kWorld}) << "every parent rank calls group_split";
  std::map<int, std::string> child_id;
  for (const pgtest_split_call_t& s : splits_) {
    const int r = s.parent.rank;
    SCOPED_TRACE("parent rank " + std::to_string(r));
    EXPECT_EQ(std::string(s.parent.id), world_id) << "not called on the parent's handle";
    EXPECT_EQ(s.parent.size, kWorld);
    EXPECT_EQ(s.color, color_of(r));
    EXPECT_EQ(s.key, -r);
    EXPECT_EQ(s.status, PG_OK);
    if (r == 3) {
      EXPECT_FALSE(s.has_config) << "PG_SPLIT_NO_COLOR gets no config";
      EXPECT_TRUE(s.out_null);
      continue;
    }
    const pgtest_split_call_t& w = world.at(r);
    ASSERT_TRUE(s.has_config);
    EXPECT_EQ(std::make_pair(int{s.made.rank}, int{s.made.size}), kChildOf.at(r));
    EXPECT_FALSE(s.out_null);
    EXPECT_TRUE(s.has_store);
    EXPECT_EQ(s.timeout_ms, kTimeoutMs);
    EXPECT_EQ(s.device_type, w.device_type);
    EXPECT_STREQ(s.master_addr, w.master_addr);
    EXPECT_EQ(std::make_pair(s.local_rank, s.local_size),
              std::make_pair(w.local_rank, w.local_size));
    child_id[r] = s.made.id;
  }
  EXPECT_EQ(child_id[0], child_id[2]);
  EXPECT_NE(child_id[0], child_id[1]);
  EXPECT_NE(child_id[0], world_id);
}

TEST_F(SplitEntry, ANestedSplitIsCalledOnTheChildsHandle) {
  ASSERT_TRUE(probe_.ok()) << dlerror();
  run_thread_ranks(
      PG_SPLIT_PROBE_PATH, kWorld,
      [](pg_group_t g, int rank) {
        pg_group_t all = nullptr;  // everyone, in reverse order
        ASSERT_EQ(pg_group_split(g, 7, -rank, &all), PG_OK) << pg_last_error();
        split_and_use(all, kWorld - 1 - rank);
        EXPECT_EQ(pg_group_destroy(all), PG_OK) << pg_last_error();
      },
      kRanks);
  probe_.take(&creates_, &splits_);
  ASSERT_EQ(splits_.size(), 2u * kWorld);
  std::set<std::string> parents;
  for (size_t i = kWorld; i < splits_.size(); ++i) {
    const pgtest_split_call_t& s = splits_[i];
    parents.insert(s.parent.id);
    EXPECT_EQ(s.color, color_of(s.parent.rank)) << "parent rank " << s.parent.rank;
    EXPECT_EQ(s.key, -s.parent.rank);
  }
  ASSERT_EQ(parents.size(), 1u);
  EXPECT_EQ(*parents.begin(), std::string(splits_[0].made.id)) << "not the child's handle";
}

TEST_F(SplitEntry, AVersionOneTableSplitsThroughGroupCreate) {
  ASSERT_TRUE(probe_v1_.ok()) << dlerror();
  run_thread_ranks(PG_SPLIT_PROBE_V1_PATH, kWorld, split_and_use, kRanks);
  probe_v1_.take(&creates_, &splits_);
  EXPECT_TRUE(splits_.empty()) << "the core read group_split beyond the table's struct_size";
  ASSERT_EQ(creates_.size(), size_t{kWorld} + kChildOf.size());
  std::set<std::string> ids;
  for (const pgtest_split_call_t& c : creates_) {
    if (c.made.size != kWorld) ids.insert(c.made.id);
  }
  EXPECT_EQ(ids.size(), 2u) << "one child group per color";
}

TEST_F(SplitEntry, AFailedSplitSaysWhichGroupAndEntry) {
  ASSERT_TRUE(probe_.ok()) << dlerror();
  run_thread_ranks(
      PG_SPLIT_PROBE_PATH, kWorld,
      [](pg_group_t g, int rank) {
        pg_group_t sub = nullptr;
        EXPECT_EQ(pg_group_split(g, color_of(rank), PGTEST_SPLIT_PROBE_REFUSE_KEY, &sub),
                  PG_ERR_BACKEND);
        EXPECT_EQ(sub, nullptr);
        const std::string message = pg_last_error();
        EXPECT_NE(message.find("split probe: refused"), std::string::npos) << message;
        const std::string context = rank == 3 ? "(rank 3 of 4, PG_SPLIT_NO_COLOR) on backend "
                                              : "on backend 'split_probe' with group_split";
        EXPECT_NE(message.find(context), std::string::npos) << message;
        EXPECT_EQ(pg_barrier(g, nullptr, nullptr), PG_OK) << "the parent is still usable";
      },
      kRanks);
}

}  // namespace
}  // namespace pgtest
