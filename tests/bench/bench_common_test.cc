// bench/common without any communication: buffer shapes and busbw factors as nccl-tests
// defines them, the data generator and checker against a host simulation of every
// collective, 16-bit conversions, option parsing and the CSV/JSON output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "data.h"
#include "host_math.h"
#include "layout.h"
#include "options.h"
#include "report.h"

namespace procgroup::bench {
namespace {

TEST(Layout, SizesAndCountsFollowNcclTests) {
  // 1 MiB of f32 over 3 ranks: 262144 elements, 87381 per rank where the op divides.
  const Layout ar = layout_for(Coll::kAllreduce, 1 << 20, 4, 3);
  EXPECT_EQ(ar.count, 262144u);
  EXPECT_EQ(ar.bytes, 1u << 20);
  const Layout ag = layout_for(Coll::kAllgather, 1 << 20, 4, 3);
  EXPECT_EQ(ag.count, 87381u);
  EXPECT_EQ(ag.send_count, 87381u);
  EXPECT_EQ(ag.recv_count, 262143u);
  EXPECT_EQ(ag.send_in_place_offset, 87381u);
  EXPECT_EQ(ag.bytes, 1048572u);
  const Layout rs = layout_for(Coll::kReduceScatter, 1 << 20, 4, 3);
  EXPECT_EQ(rs.send_count, 262143u);
  EXPECT_EQ(rs.recv_count, 87381u);
  EXPECT_EQ(rs.recv_in_place_offset, 87381u);
  const Layout a2a = layout_for(Coll::kAlltoall, 1 << 20, 4, 3);
  EXPECT_EQ(a2a.count, 87381u);
  EXPECT_EQ(a2a.send_count, a2a.recv_count);
  EXPECT_EQ(layout_for(Coll::kScatter, 1 << 20, 4, 3).recv_count, 87381u);
  EXPECT_EQ(layout_for(Coll::kGather, 8, 4, 3).count, 0u);  // below one element per rank
  EXPECT_EQ(layout_for(Coll::kSendrecv, 10, 8, 2).bytes, 8u);
}

TEST(Layout, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(busbw_factor(Coll::kAllreduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busbw_factor(Coll::kAllreduce, 4), 1.5);
  for (Coll c :
       {Coll::kAllgather, Coll::kReduceScatter, Coll::kAlltoall, Coll::kGather, Coll::kScatter}) {
    EXPECT_DOUBLE_EQ(busbw_factor(c, 4), 0.75) << coll_name(c);
  }
  for (Coll c : {Coll::kBroadcast, Coll::kReduce, Coll::kSendrecv}) {
    EXPECT_DOUBLE_EQ(busbw_factor(c, 4), 1.0) << coll_name(c);
  }
}

TEST(Layout, SweepSizes) {
  const auto s = sweep_sizes(8, 256u << 20, 2);
  ASSERT_EQ(s.size(), 26u);
  EXPECT_EQ(s.front(), 8u);
  EXPECT_EQ(s.back(), 256u << 20);
  EXPECT_EQ(sweep_sizes(3, 100, 10), (std::vector<uint64_t>{3, 30}));
  EXPECT_EQ(sweep_sizes(1, std::numeric_limits<uint64_t>::max(), 2).size(), 64u);  // no wrap
  EXPECT_TRUE(sweep_sizes(5, 4, 2).empty());
}

using Bytes = std::vector<std::byte>;

// What each rank's output holds after op, computed from every rank's input on the host.
std::vector<Bytes> simulate(const DataSpec& base, const Layout& l, int n) {
  const size_t es = dtype_size(base.dtype);
  std::vector<Bytes> in(n, Bytes(l.send_count * es)), out(n, Bytes(l.recv_count * es));
  for (int r = 0; r < n; ++r) {
    DataSpec s = base;
    s.rank = r;
    fill_input(s, l, in[r].data());
  }
  const size_t block = l.count * es;
  for (int r = 0; r < n; ++r) {
    auto* o = out[r].data();
    switch (base.op) {
      case Coll::kAllreduce:
      case Coll::kReduce:
      case Coll::kReduceScatter: {
        Bytes acc = in[0];
        for (int s = 1; s < n; ++s)
          reduce_into(base.dtype, base.redop, acc.data(), in[s].data(), l.send_count);
        if (base.redop == RedOp::kAvg) scale_down(base.dtype, acc.data(), l.send_count, n);
        const size_t offset = base.op == Coll::kReduceScatter ? r * block : 0;
        std::memcpy(o, acc.data() + offset, l.recv_count * es);
        break;
      }
      case Coll::kAllgather:
      case Coll::kGather:
        for (int s = 0; s < n; ++s) std::memcpy(o + s * block, in[s].data(), block);
        break;
      case Coll::kBroadcast: std::memcpy(o, in[base.root].data(), block); break;
      case Coll::kScatter: std::memcpy(o, in[base.root].data() + r * block, block); break;
      case Coll::kAlltoall:
        for (int s = 0; s < n; ++s) std::memcpy(o + s * block, in[s].data() + r * block, block);
        break;
      case Coll::kSendrecv: std::memcpy(o, in[(r + n - 1) % n].data(), block); break;
    }
  }
  return out;
}

// The expected values agree with each collective's definition, for every op, dtype, reduce
// op and several group sizes: the checker finds nothing wrong in a correct result.
TEST(Data, ExpectedValuesMatchAHostSimulationOfEveryCollective) {
  for (int n : {1, 2, 3, 5}) {
    for (Coll op : kAllColls) {
      for (Dtype dtype : kAllDtypes) {
        for (RedOp redop : reduces(op) ? std::vector<RedOp>(kAllRedOps.begin(), kAllRedOps.end())
                                       : std::vector<RedOp>{RedOp::kSum}) {
          const Layout l = layout_for(op, 1000, dtype_size(dtype), n);
          const DataSpec base{op, dtype, redop, n - 1, 0, n, 7};
          const auto outputs = simulate(base, l, n);
          for (int r = 0; r < n; ++r) {
            DataSpec s = base;
            s.rank = r;
            if (!output_checked(s)) continue;
            Bytes expected(l.recv_count * dtype_size(dtype));
            fill_expected(s, l, expected.data());
            EXPECT_EQ(count_wrong(s, expected.data(), outputs[r].data(), l.recv_count), 0u)
                << coll_name(op) << " " << dtype_name(dtype) << " " << redop_name(redop)
                << " n=" << n << " rank " << r;
          }
        }
      }
    }
  }
}

TEST(Data, InputsDifferBetweenRanksAndReps) {
  const Layout l = layout_for(Coll::kAllgather, 4096, 4, 2);
  Bytes a(l.send_count * 4), b(l.send_count * 4), c(l.send_count * 4);
  fill_input({Coll::kAllgather, Dtype::kF32, RedOp::kSum, 0, 0, 2, 1}, l, a.data());
  fill_input({Coll::kAllgather, Dtype::kF32, RedOp::kSum, 0, 1, 2, 1}, l, b.data());
  fill_input({Coll::kAllgather, Dtype::kF32, RedOp::kSum, 0, 0, 2, 2}, l, c.data());
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
}

TEST(Data, CheckerCountsEveryWrongElement) {
  const DataSpec s{Coll::kAllreduce, Dtype::kI32, RedOp::kSum, 0, 0, 2, 1};
  const Layout l = layout_for(Coll::kAllreduce, 40000, 4, 2);
  Bytes expected(l.recv_count * 4), got;
  fill_expected(s, l, expected.data());
  got = expected;
  EXPECT_EQ(count_wrong(s, expected.data(), got.data(), l.recv_count), 0u);
  reinterpret_cast<int32_t*>(got.data())[9999] += 1;
  reinterpret_cast<int32_t*>(got.data())[17] += 1;
  EXPECT_EQ(count_wrong(s, expected.data(), got.data(), l.recv_count), 2u);
  poison(got.data(), got.size());
  EXPECT_EQ(count_wrong(s, expected.data(), got.data(), l.recv_count), l.recv_count);
}

TEST(Data, AverageAllowsOneRoundingStepOnly) {
  const DataSpec s{Coll::kAllreduce, Dtype::kF32, RedOp::kAvg, 0, 0, 3, 1};
  const float expected[2] = {3.0f, 40.0f};
  float got[2] = {std::nextafter(3.0f, 4.0f), 40.0f};
  EXPECT_EQ(count_wrong(s, expected, got, 2), 0u);
  got[1] = 41.0f;
  EXPECT_EQ(count_wrong(s, expected, got, 2), 1u);
  poison(got, sizeof(got));  // NaN
  EXPECT_EQ(count_wrong(s, expected, got, 2), 2u);
}

TEST(Data, CorruptionChangesTheFirstElementOnly) {
  float v[3] = {1, 2, 3};
  corrupt_first_element(Dtype::kF32, v);
  EXPECT_EQ(v[0], 127.0f);
  EXPECT_EQ(v[1], 2.0f);
}

TEST(HostMath, HalfRoundTripsAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0;
    if (!nan) {
      EXPECT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(h))), h) << h;
    }
    const bool bnan = (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
    if (!bnan) {
      EXPECT_EQ(float_to_bf16(bf16_to_float(static_cast<uint16_t>(h))), h) << h;
    }
  }
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie: to even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie: to even
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // rounds up to infinity
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie: to even
}

TEST(HostMath, ReduceAndScale) {
  int8_t a[3] = {1, -5, 100}, b[3] = {2, 7, -100};
  reduce_into(Dtype::kI8, RedOp::kMax, a, b, 3);
  EXPECT_EQ(a[0], 2);
  EXPECT_EQ(a[1], 7);
  EXPECT_EQ(a[2], 100);
  int32_t d[2] = {9, -9};
  scale_down(Dtype::kI32, d, 2, 2);
  EXPECT_EQ(d[0], 4);  // truncation, as procgroup's core divides
  EXPECT_EQ(d[1], -4);
  uint16_t h[1] = {float_to_half(3.0f)}, k[1] = {float_to_half(4.0f)};
  reduce_into(Dtype::kF16, RedOp::kProd, h, k, 1);
  EXPECT_EQ(half_to_float(h[0]), 12.0f);
}

ParsedOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "collbench");
  std::vector<char*> argv;
  argv.reserve(args.size());
  for (std::string& a : args) argv.push_back(a.data());
  return parse_options(static_cast<int>(argv.size()), argv.data(), {"collbench", "test", true});
}

TEST(Options, NcclTestsFlagsWithSuffixesListsAndAll) {
  const ParsedOptions p = parse(
      {"reduce_scatter", "-b",    "1K",  "-e", "256M", "-f", "4", "-n", "7", "-w", "0", "-d",
       "f32,bf16",       "-o",    "all", "-r", "1",    "-c", "0", "-z", "1", "-a", "1", "--direct",
       "--json",         "x.json"});
  ASSERT_TRUE(p.run);
  const Options& o = p.options;
  EXPECT_EQ(o.op, Coll::kReduceScatter);
  EXPECT_EQ(o.min_bytes, 1024u);
  EXPECT_EQ(o.max_bytes, 256u << 20);
  EXPECT_EQ(o.factor, 4u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup, 0);
  EXPECT_EQ(o.dtypes, (std::vector<Dtype>{Dtype::kF32, Dtype::kBf16}));
  EXPECT_EQ(o.redops.size(), 5u);
  EXPECT_EQ(o.root, 1);
  EXPECT_FALSE(o.check);
  EXPECT_TRUE(o.blocking);
  EXPECT_EQ(o.aggregate, TimeAggregate::kAvg);
  EXPECT_TRUE(o.direct);
  EXPECT_EQ(o.json_path, "x.json");
  const ParsedOptions d = parse({"-d", "all", "gather"});  // options before the subcommand too
  ASSERT_TRUE(d.run);
  EXPECT_EQ(d.options.op, Coll::kGather);
  EXPECT_EQ(d.options.dtypes.size(), 8u);
  EXPECT_EQ(d.options.redops, std::vector<RedOp>{RedOp::kSum});
  EXPECT_EQ(d.options.aggregate, TimeAggregate::kMax);  // the slowest rank by default
}

TEST(Options, UsageErrors) {
  EXPECT_EQ(parse({"allreduce", "-b", "0"}).exit_code, kUsageExitCode);
  EXPECT_EQ(parse({"allreduce", "-o", "mean"}).exit_code, kUsageExitCode);
  EXPECT_EQ(parse({"allreduce", "-c", "2"}).exit_code, kUsageExitCode);
  EXPECT_EQ(parse({"allreduce", "sendrecv"}).exit_code, kUsageExitCode);
  EXPECT_FALSE(parse({"--help"}).run);
  EXPECT_EQ(parse({"--help"}).exit_code, 0);
}

TEST(Report, CsvAndJsonOfOneRow) {
  Options o;
  o.op = Coll::kAllreduce;
  Reporter rep(RunInfo{"collbench", "gloo", "", "gloo", 2, o}, /*prints=*/false);
  Row row{Coll::kAllreduce, Dtype::kF32,  RedOp::kSum, -1, 1024, 256, {},
          std::nullopt,     std::nullopt, std::nullopt};
  row.out_of_place = {10.0, 0.1024, 0.1024, 0};
  row.in_place = Measurement{20.0, 0.0512, 0.0512, 3};
  row.direct = Measurement{8.0, 0.128, 0.128, 0};
  row.reference = Reference{12.5, 6.25};
  rep.row(row);
  EXPECT_EQ(rep.total_wrong(), 3);
  const std::string csv = rep.to_csv();
  EXPECT_NE(csv.find(",ratio_busbw,added_us,memcpy_gbps,reduce_f32_gbps\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find("\ncollbench,gloo,2,allreduce,1024,256,f32,sum,-1,10.000,0.102400,0.102400,0,"
                     "20.000,0.051200,0.051200,3,8.000,0.128000,0,0.8000,2.000,12.500000,"
                     "6.250000\n"),
            std::string::npos)
      << csv;
  const nlohmann::json j = rep.to_json();
  EXPECT_DOUBLE_EQ(j["rows"][0]["reference"]["memcpy_gbps"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(j["rows"][0]["reference"]["reduce_f32_gbps"].get<double>(), 6.25);
  EXPECT_EQ(j["rows"][0]["in_place"]["wrong"], 3);
  EXPECT_DOUBLE_EQ(j["rows"][0]["ratio_busbw"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(j["rows"][0]["added_us"].get<double>(), 2.0);  // 10 us through procgroup, 8 raw
  EXPECT_EQ(j["wrong_total"], 3);
  EXPECT_EQ(format_bytes(8), "8 B");
  EXPECT_EQ(format_bytes(256u << 20), "256 MiB");
  EXPECT_EQ(format_bytes(1000), "1000 B");
}

// On one rank busbw is 0 (the factor 2(n-1)/n is), but procgroup against the raw library
// still has a ratio: the same as the busbw ratio wherever that is defined.
TEST(Report, RatioIsDefinedOnOneRank) {
  Options o;
  Reporter rep(RunInfo{"collbench", "nccl", "", "nccl", 1, o}, /*prints=*/false);
  Row row{Coll::kAllreduce, Dtype::kF32,  RedOp::kSum, -1, 1024, 256, {},
          std::nullopt,     std::nullopt, std::nullopt};
  row.out_of_place = {10.0, 0.1024, 0.0, 0};
  row.direct = Measurement{8.0, 0.128, 0.0, 0};
  rep.row(row);
  EXPECT_DOUBLE_EQ(rep.to_json()["rows"][0]["ratio_busbw"].get<double>(), 0.8);
}

TEST(Options, NcclTestsDtypeNames) {
  const ParsedOptions p =
      parse({"allreduce", "-d", "float,half,bfloat16,double,int8,uint8,int32,int64"});
  ASSERT_TRUE(p.run);
  EXPECT_EQ(p.options.dtypes,
            (std::vector<Dtype>{Dtype::kF32, Dtype::kF16, Dtype::kBf16, Dtype::kF64, Dtype::kI8,
                                Dtype::kU8, Dtype::kI32, Dtype::kI64}));
  EXPECT_EQ(parse({"allreduce", "-d", "uint64"}).exit_code, kUsageExitCode);
  EXPECT_EQ(dtype_error("uint64").rfind("'uint64' is an nccl-tests type", 0), 0u);
}

}  // namespace
}  // namespace procgroup::bench
