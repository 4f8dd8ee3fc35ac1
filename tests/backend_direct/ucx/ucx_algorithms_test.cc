// Every algorithm of the ucx plugin, forced through PROCGROUP_UCX_*, at world sizes 1-5
// and 7 (non-powers of two fold), on every op, dtype and reduce op, in place and not, with
// counts around the edges (0, 1, fewer elements than ranks, odd) and chunks of a few
// dozen bytes so the pipelines run many chunks through a small window. Results are checked
// element by element against the host reference; ops run in batches, so several are in
// flight at once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ucx_cases.h"
#include "ucx_test_support.h"

namespace procgroup::ucx_test {
namespace {

struct Config {
  const char* name;
  std::vector<std::pair<std::string, std::string>> env;
};

const Config kConfigs[] = {
    {"Defaults", {}},
    {"SmallAlgorithms",
     {{"PROCGROUP_UCX_ALLREDUCE", "rd"},
      {"PROCGROUP_UCX_BROADCAST", "binomial"},
      {"PROCGROUP_UCX_REDUCE", "binomial"},
      {"PROCGROUP_UCX_ALLGATHER", "bruck"}}},
    {"Rabenseifner", {{"PROCGROUP_UCX_ALLREDUCE", "rabenseifner"}}},
    {"PipelinedRingsAndChains",
     {{"PROCGROUP_UCX_ALLREDUCE", "ring"},
      {"PROCGROUP_UCX_BROADCAST", "chain"},
      {"PROCGROUP_UCX_REDUCE", "chain"},
      {"PROCGROUP_UCX_ALLGATHER", "ring"},
      {"PROCGROUP_UCX_CHUNK_BYTES", "40"},
      {"PROCGROUP_UCX_WINDOW", "2"}}},
    // Endpoints made on first use (as in groups above 64 ranks), over TCP (UCX's peer
    // error handling instead of pidfds).
    {"LazyConnectionsOverTcp", {{"PROCGROUP_UCX_CONNECT_ALL_MAX", "0"}, {"UCX_TLS", "tcp,self"}}},
};

class Algorithms : public ::testing::TestWithParam<std::tuple<int, int>> {};

std::vector<uint64_t> counts_for(int size) {
  std::vector<uint64_t> counts = {0, 1, 5, 97};
  if (size > 2) counts.push_back(static_cast<uint64_t>(size - 1));  // fewer than ranks
  if (size <= 4) counts.push_back(1000);
  return counts;
}

// Runs every case in batches of 8 in flight; reports the first few failures.
void run_cases(RankEnv& env, const std::vector<Case>& cases) {
  constexpr size_t kBatch = 8;
  int reported = 0;
  for (size_t first = 0; first < cases.size(); first += kBatch) {
    std::vector<Pending> batch;
    for (size_t i = first; i < std::min(cases.size(), first + kBatch); ++i) {
      batch.push_back(start_case(env, cases[i]));
    }
    for (Pending& p : batch) {
      const std::string bad = finish_case(env, p);
      if (bad.empty()) continue;
      if (reported++ < 5) {
        env.expect(false, bad);
      } else {
        ++env.failures;
      }
    }
  }
}

TEST_P(Algorithms, EveryOpDtypeAndCountIsExact) {
  const auto [config_index, size] = GetParam();
  WorldOptions options;
  options.env = kConfigs[config_index].env;
  options.timeout_ms = 60000;  // correctness, not speed: a host shared with builds is slow
  options.limit_s = 150;
  run_world(size, options, [](RankEnv& env) {
    std::vector<Case> cases;
    const int last = env.size - 1;
    for (uint64_t n : counts_for(env.size)) {
      for (pg_dtype_t dtype : all_dtypes()) {
        for (bool in_place : {false, true}) {
          for (pg_reduce_op_t redop : all_reduce_ops()) {
            cases.push_back(Case{PG_OP_ALLREDUCE, dtype, redop, n, 0, in_place});
            cases.push_back(Case{PG_OP_REDUCE_SCATTER, dtype, redop, n, 0, in_place});
            cases.push_back(Case{PG_OP_REDUCE, dtype, redop, n, (int)(n % env.size), in_place});
          }
          for (int root : {0, last}) {
            cases.push_back(Case{PG_OP_BROADCAST, dtype, PG_REDUCE_SUM, n, root, in_place});
            cases.push_back(Case{PG_OP_GATHER, dtype, PG_REDUCE_SUM, n, root, in_place});
            cases.push_back(Case{PG_OP_SCATTER, dtype, PG_REDUCE_SUM, n, root, in_place});
          }
          cases.push_back(Case{PG_OP_ALLGATHER, dtype, PG_REDUCE_SUM, n, 0, in_place});
          cases.push_back(Case{PG_OP_ALLTOALL, dtype, PG_REDUCE_SUM, n, 0, in_place});
        }
      }
    }
    run_cases(env, cases);
  });
}

INSTANTIATE_TEST_SUITE_P(Ucx, Algorithms,
                         ::testing::Combine(::testing::Range(0,
                                                             static_cast<int>(std::size(kConfigs))),
                                            ::testing::Values(1, 2, 3, 4, 5, 7)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& p) {
                           return std::string(kConfigs[std::get<0>(p.param)].name) + "_world" +
                                  std::to_string(std::get<1>(p.param));
                         });

// Large messages take the pipelined paths with the default chunk size (1 MiB): 3 MiB + 1
// element per rank crosses several chunks and an uneven last one.
// Fused (reduce while UCX unpacks) and plain receives, both cutting elements of every size
// across the transport's fragments.
TEST(UcxAlgorithmsLarge, DefaultChunksAcrossRanks) {
  for (const char* fused : {"1", "0"}) {
    for (int size : {2, 3}) {
      WorldOptions options;
      options.limit_s = 120;
      options.env = {{"PROCGROUP_UCX_FUSED_RECV", fused}};
      run_world(size, options, [](RankEnv& env) {
        const uint64_t n = (3u << 20) / 4 + 1;
        std::vector<Case> cases = {
            Case{PG_OP_ALLREDUCE, PG_DTYPE_F32, PG_REDUCE_SUM, n, 0, false},
            Case{PG_OP_ALLREDUCE, PG_DTYPE_BF16, PG_REDUCE_AVG, n, 0, true},
            Case{PG_OP_BROADCAST, PG_DTYPE_I32, PG_REDUCE_SUM, n, env.size - 1, false},
            Case{PG_OP_REDUCE, PG_DTYPE_F64, PG_REDUCE_MAX, n, 1, false},
            Case{PG_OP_REDUCE_SCATTER, PG_DTYPE_F16, PG_REDUCE_SUM, n, 0, false},
            Case{PG_OP_ALLGATHER, PG_DTYPE_U8, PG_REDUCE_SUM, n, 0, true},
            Case{PG_OP_ALLTOALL, PG_DTYPE_I64, PG_REDUCE_SUM, n / 8, 0, false},
            Case{PG_OP_ALLREDUCE, PG_DTYPE_I64, PG_REDUCE_PROD, n / 2, 0, false},
            Case{PG_OP_REDUCE, PG_DTYPE_I8, PG_REDUCE_MIN, n, 0, true},
        };
        run_cases(env, cases);
      });
    }
  }
}

}  // namespace
}  // namespace procgroup::ucx_test
