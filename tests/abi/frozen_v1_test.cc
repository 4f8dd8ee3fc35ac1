// ABI version 1 as a tested promise, against the frozen copy of the 1.0 headers in
// tests/abi/frozen/v1/:
// - today's headers keep every v1 struct, field and constant where v1 put them
//   (layout_probe.c expands v1_surface.h against both header sets);
// - a plugin compiled from the frozen procgroup_backend.h (the example_tcp sources, built as
//   libprocgroup-frozen_v1.so) is loaded by today's core, which runs every collective on it
//   over its send/recv, three ranks as threads of this process.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "layout_probe.h"
#include "procgroup/procgroup.h"

namespace {

std::map<std::string, const pg_layout_row_t*> index_rows(const pg_layout_row_t* rows) {
  std::map<std::string, const pg_layout_row_t*> by_name;
  for (; rows->name != nullptr; ++rows) by_name[rows->name] = rows;
  return by_name;
}

TEST(FrozenV1Layout, TodaysHeadersKeepEveryV1StructFieldAndConstant) {
  const auto frozen = index_rows(pg_layout_frozen_v1);
  const auto current = index_rows(pg_layout_current);
  ASSERT_GT(frozen.size(), 100u) << "the v1 surface lost its rows";
  ASSERT_EQ(frozen.size(), current.size());
  for (const auto& [name, v1] : frozen) {
    const pg_layout_row_t* now = current.at(name);
    if (std::strchr(name.c_str(), '.') != nullptr) {
      EXPECT_EQ(now->first, v1->first) << name << " moved: offset " << v1->first << " in v1";
      EXPECT_EQ(now->second, v1->second) << name << " changed size: " << v1->second << " in v1";
    } else if (name.rfind("pg_", 0) == 0) {
      EXPECT_GE(now->first, v1->first) << "struct " << name << " shrank below its v1 size";
      EXPECT_GE(now->second, v1->second) << "struct " << name << " lost alignment";
    } else {
      EXPECT_EQ(now->first, v1->first) << "constant " << name << " changed its v1 value";
    }
  }
}

// ---- The frozen-v1 plugin under today's core ------------------------------------

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pgabi-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What one rank saw; checked on the test thread.
struct RankLog {
  std::vector<std::string> problems;
  void expect(bool ok, const std::string& what) {
    if (!ok) problems.push_back(what);
  }
  void call(pg_status_t s, const std::string& what) {
    if (s != PG_OK) problems.push_back(what + ": " + pg_status_name(s) + ": " + pg_last_error());
  }
};

constexpr int kWorld = 3;
constexpr uint64_t kN = 1031;  // odd, so no algorithm's chunks line up evenly

template <class T>
pg_buffer_t cpu(std::vector<T>& v, pg_dtype_t dtype) {
  return pg_buffer_cpu(v.data(), v.size(), dtype);
}

// Every collective once, results checked against what each rank contributed.
void run_rank(int rank, const std::string& store, RankLog& log) {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.rank = rank;
  o.size = kWorld;
  o.backend = PG_FROZEN_V1_PLUGIN;
  o.store_url = store.c_str();
  o.timeout_ms = 20000;
  pg_group_t g = nullptr;
  log.call(pg_group_create(&o, &g), "pg_group_create");
  if (g == nullptr) return;

  const char* name = nullptr;
  pg_capabilities_t caps = PG_CAPABILITIES_INIT;
  log.call(pg_group_backend_name(g, &name), "backend name");
  log.expect(name != nullptr && std::strcmp(name, "frozen_v1") == 0, "backend is frozen_v1");
  log.call(pg_group_capabilities(g, &caps), "capabilities");
  log.expect(caps.native_ops == (1u << PG_OP_SEND | 1u << PG_OP_RECV),
             "only send and recv are native, so every collective below is the core's");

  pg_op_options_t opts = PG_OP_OPTIONS_INIT;
  std::vector<float> f(kN);
  std::iota(f.begin(), f.end(), static_cast<float>(rank));
  pg_buffer_t fb = cpu(f, PG_DTYPE_F32);
  log.call(pg_allreduce(g, nullptr, &fb, &opts, nullptr), "allreduce sum");
  for (uint64_t i = 0; i < kN; ++i)
    log.expect(f[i] == static_cast<float>(3 * i + 3), "allreduce sum element " + std::to_string(i));

  std::vector<double> d(kN, rank + 1.0);
  pg_buffer_t db = cpu(d, PG_DTYPE_F64);
  opts.reduce_op = PG_REDUCE_AVG;
  log.call(pg_allreduce(g, nullptr, &db, &opts, nullptr), "allreduce avg");
  log.expect(d[0] == 2.0 && d[kN - 1] == 2.0, "allreduce avg of 1, 2, 3 is 2");

  std::vector<int32_t> b(kN, rank == 2 ? 77 : -1);
  pg_buffer_t bb = cpu(b, PG_DTYPE_I32);
  opts = PG_OP_OPTIONS_INIT;
  opts.root = 2;
  log.call(pg_broadcast(g, nullptr, &bb, &opts, nullptr), "broadcast");
  log.expect(b[0] == 77 && b[kN - 1] == 77, "broadcast from rank 2");

  std::vector<uint8_t> mine(kN, static_cast<uint8_t>(10 + rank)), all(kN * kWorld, 0);
  pg_buffer_t mb = cpu(mine, PG_DTYPE_U8), ab = cpu(all, PG_DTYPE_U8);
  log.call(pg_allgather(g, &mb, &ab, nullptr, nullptr), "allgather");
  for (int r = 0; r < kWorld; ++r)
    log.expect(all[r * kN] == 10 + r && all[r * kN + kN - 1] == 10 + r, "allgather block");

  std::vector<int64_t> rs_in(kN * kWorld), rs_out(kN);
  for (uint64_t i = 0; i < rs_in.size(); ++i) rs_in[i] = static_cast<int64_t>(i) * (rank + 1);
  pg_buffer_t ri = cpu(rs_in, PG_DTYPE_I64), ro = cpu(rs_out, PG_DTYPE_I64);
  opts = PG_OP_OPTIONS_INIT;
  opts.reduce_op = PG_REDUCE_MAX;
  log.call(pg_reduce_scatter(g, &ri, &ro, &opts, nullptr), "reduce_scatter max");
  for (uint64_t i = 0; i < kN; ++i)
    log.expect(rs_out[i] == static_cast<int64_t>(rank * kN + i) * kWorld, "reduce_scatter max");

  std::vector<int32_t> a_in(kN * kWorld), a_out(kN * kWorld);
  for (uint64_t i = 0; i < a_in.size(); ++i) a_in[i] = rank * 100000 + static_cast<int32_t>(i);
  pg_buffer_t ai = cpu(a_in, PG_DTYPE_I32), ao = cpu(a_out, PG_DTYPE_I32);
  log.call(pg_alltoall(g, &ai, &ao, nullptr, nullptr), "alltoall");
  for (int r = 0; r < kWorld; ++r)
    log.expect(a_out[r * kN] == r * 100000 + rank * static_cast<int32_t>(kN), "alltoall block");

  std::vector<int32_t> p(kN, rank + 2);
  pg_buffer_t pb = cpu(p, PG_DTYPE_I32);
  opts = PG_OP_OPTIONS_INIT;
  opts.reduce_op = PG_REDUCE_PROD;
  opts.root = 1;
  log.call(pg_reduce(g, nullptr, &pb, &opts, nullptr), "reduce prod");
  if (rank == 1) log.expect(p[0] == 24 && p[kN - 1] == 24, "reduce prod 2*3*4 at the root");

  log.call(pg_barrier(g, nullptr, nullptr), "barrier");

  // A ring of point-to-point messages, both directions in flight at once.
  std::vector<int64_t> out(kN, rank), in(kN, -1);
  pg_buffer_t sb = cpu(out, PG_DTYPE_I64), rb = cpu(in, PG_DTYPE_I64);
  pg_op_options_t so = PG_OP_OPTIONS_INIT, ro2 = PG_OP_OPTIONS_INIT;
  so.peer = (rank + 1) % kWorld;
  ro2.peer = (rank + kWorld - 1) % kWorld;
  so.tag = ro2.tag = 5;
  pg_work_t rw = nullptr, sw = nullptr;
  log.call(pg_recv(g, &rb, &ro2, &rw), "recv");
  log.call(pg_send(g, &sb, &so, &sw), "send");
  for (pg_work_t w : {sw, rw}) {
    if (w == nullptr) continue;
    log.call(pg_work_wait(w, -1), "send/recv wait");
    pg_work_release(w);
  }
  log.expect(in[0] == ro2.peer && in[kN - 1] == ro2.peer, "ring message from the left");
  log.call(pg_group_destroy(g), "pg_group_destroy");
}

TEST(FrozenV1Plugin, TodaysCoreLoadsItAndRunsEveryCollectiveOverItsSendRecv) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string store = "file://" + dir.path() + "/store";
  std::filesystem::create_directory(dir.path() + "/store");
  std::vector<RankLog> logs(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) ranks.emplace_back(run_rank, r, store, std::ref(logs[r]));
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kWorld; ++r) {
    for (const std::string& p : logs[r].problems) ADD_FAILURE() << "rank " << r << ": " << p;
  }
}

}  // namespace
