// Reducer errors: ranks that registered different parameters or options all get a clear
// error at construction (never a hang), and misuse of the mark-ready protocol throws an
// error naming the parameter.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>

#include "ddp_test_util.h"
#include "device_test_util.h"
#include "procgroup/ddp/reducer.h"
#include "reducer_test_util.h"

namespace procgroup::ddp::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Every one of 3 ranks must throw a ddp::Error with `status` whose message has `text`,
// well before the group timeout (20 s).
void expect_construction_error(const std::function<std::vector<Parameter>(int, FloatParams&)>& make,
                               const std::function<ReducerOptions(int)>& options,
                               pg_status_t status, const std::string& text) {
  const auto start = Clock::now();
  std::vector<std::string> messages(3);
  run_ranks(3,
            [&](Group& group, int rank) {
              FloatParams p({8, 4, 2});
              try {
                Reducer reducer(group, make(rank, p), options(rank));
                ADD_FAILURE() << "rank " << rank << ": no error";
              } catch (const Error& e) {
                EXPECT_EQ(e.status(), status) << e.what();
                messages[rank] = e.what();
              }
            },
            {.backend = "loopback", .timeout_ms = 20000});
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(messages[r].find(text), std::string::npos) << "rank " << r << ": " << messages[r];
    EXPECT_EQ(messages[r], messages[0]) << "ranks report the same difference";
  }
}

ReducerOptions defaults(int) { return {}; }

TEST(DdpReducerMismatch, DifferentParameterCount) {
  expect_construction_error(
      [](int rank, FloatParams& p) {
        auto params = p.parameters();
        if (rank == 2) params.pop_back();
        return params;
      },
      defaults, PG_ERR_MISMATCH,
      "rank 0 has 3 parameters, rank 2 has 2; first difference at index 2: rank 0 has 'p2' "
      "f32 x 2, rank 2 has nothing");
}

TEST(DdpReducerMismatch, DifferentSize) {
  expect_construction_error(
      [](int rank, FloatParams& p) {
        auto params = p.parameters();
        if (rank == 1) params[1].numel = 3;
        return params;
      },
      defaults, PG_ERR_MISMATCH,
      "first difference at index 1: rank 0 has 'p1' f32 x 4, rank 1 has 'p1' f32 x 3");
}

TEST(DdpReducerMismatch, DifferentDtype) {
  std::vector<double> d(4), gd(4);
  expect_construction_error(
      [&](int rank, FloatParams& p) {
        auto params = p.parameters();
        if (rank == 2) params[1] = Parameter::of("p1", std::span(d), std::span(gd));
        return params;
      },
      defaults, PG_ERR_MISMATCH, "rank 0 has 'p1' f32 x 4, rank 2 has 'p1' f64 x 4");
}

TEST(DdpReducerMismatch, DifferentOrder) {
  expect_construction_error(
      [](int rank, FloatParams& p) {
        auto params = p.parameters();
        if (rank == 1) std::swap(params[0], params[1]);
        return params;
      },
      defaults, PG_ERR_MISMATCH, "index 0: rank 0 has 'p0' f32 x 8, rank 1 has 'p1' f32 x 4");
}

TEST(DdpReducerMismatch, DifferentName) {
  expect_construction_error(
      [](int rank, FloatParams& p) {
        auto params = p.parameters();
        if (rank == 2) params[2].name = "other";
        return params;
      },
      defaults, PG_ERR_MISMATCH, "rank 0 has 'p2' f32 x 2, rank 2 has 'other' f32 x 2");
}

TEST(DdpReducerMismatch, DifferentBucketOptions) {
  expect_construction_error([](int, FloatParams& p) { return p.parameters(); },
                            [](int rank) {
                              ReducerOptions o;
                              if (rank == 1) o.bucket_cap_bytes = 4096;
                              return o;
                            },
                            PG_ERR_MISMATCH, "rank 1 has 1048576, 4096");
}

TEST(DdpReducerMismatch, DifferentHook) {
  expect_construction_error([](int, FloatParams& p) { return p.parameters(); },
                            [](int rank) {
                              ReducerOptions o;
                              if (rank == 2) o.comm_hook = fp16_compress_hook();
                              return o;
                            },
                            PG_ERR_MISMATCH, "a different comm_hook");
}

TEST(DdpReducerMismatch, ParametersOnTwoDevicesAreReportedByEveryRank) {
  expect_construction_error(
      [](int rank, FloatParams& p) {
        auto params = p.parameters();
        if (rank == 1) params[0].device = {PG_DEVICE_CUDA, 0};
        return params;
      },
      defaults, PG_ERR_INVALID_ARGUMENT,
      "Reducer construction failed on rank 1: parameters on more than one device: 'p0' is on "
      "cuda:0, parameter 'p1' (index 1) on cpu; a Reducer's parameters share one device");
}

// Host memory declared as CUDA on one rank: without CUDA (build or device) that is
// PG_ERR_UNSUPPORTED with the reason; with a device, the pointer check names the parameter.
TEST(DdpReducerMismatch, CudaParametersWithoutUsableMemoryAreReportedByEveryRank) {
  const std::string why = cuda_unavailable();
  const std::string prefix = "Reducer construction failed on rank 2: ";
  expect_construction_error(
      [](int rank, FloatParams& p) {
        auto params = p.parameters();
        if (rank == 2) {
          for (Parameter& q : params) q.device = {PG_DEVICE_CUDA, 0};
        }
        return params;
      },
      defaults, why.empty() ? PG_ERR_INVALID_ARGUMENT : PG_ERR_UNSUPPORTED,
      why.empty() ? prefix + "parameter 'p0' (index 0): data is host memory, not memory on cuda:0"
                  : prefix + "parameters on cuda:0: " + why);
}

TEST(DdpReducerMismatch, UnknownDeviceTypeIsRejected) {
  expect_construction_error(
      [](int, FloatParams& p) {
        auto params = p.parameters();
        for (Parameter& q : params) q.device = {7, 0};
        return params;
      },
      defaults, PG_ERR_INVALID_ARGUMENT,
      "Reducer construction failed on rank 0: parameters on device-type-7: unknown device");
}

TEST(DdpReducerMismatch, IntegerGradientIsRejected) {
  std::vector<int32_t> v(4), g(4);
  expect_construction_error(
      [&](int, FloatParams& p) {
        auto params = p.parameters();
        params.push_back(Parameter::of("steps", std::span(v), std::span(g)));
        return params;
      },
      defaults, PG_ERR_INVALID_ARGUMENT, "'steps' (index 3) has dtype i32");
}

// Protocol errors on a group of one rank (they are local by nature).
struct DdpReducerProtocol : ::testing::Test {
  template <class Fn>
  void run(Fn fn) {
    run_ranks(1, [&](Group& group, int) {
      FloatParams p({3, 2});
      Reducer reducer(group, p.parameters());
      fn(reducer);
    });
  }
  static std::string error_of(const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
};

TEST_F(DdpReducerProtocol, MarkingTwiceNamesTheParameterAndKeepsTheReducerUsable) {
  run([](Reducer& r) {
    r.mark_grad_ready(1);
    EXPECT_EQ(error_of([&] { r.mark_grad_ready(1); }),
              "PG_ERR_INVALID_ARGUMENT: ddp: the gradient of parameter 'p1' (index 1, f32 x 2) "
              "was marked ready twice in one backward pass (finalize() ends a pass)");
    r.mark_grad_ready(0);
    r.finalize();
    r.mark_grad_ready(1);  // a new pass
    r.mark_grad_ready(0);
    r.finalize();
  });
}

TEST_F(DdpReducerProtocol, OutOfRangeAndDeclaredUnusedMarks) {
  run([](Reducer& r) {
    EXPECT_NE(error_of([&] { r.mark_grad_ready(2); }).find("mark_grad_ready(2): out of range"),
              std::string::npos);
    r.prepare_for_backward(std::vector<size_t>{0});
    EXPECT_NE(error_of([&] { r.mark_grad_ready(0); }).find("'p0'"), std::string::npos);
    EXPECT_NE(error_of([&] { r.prepare_for_backward(); }).find("during a backward pass"),
              std::string::npos);
    r.mark_grad_ready(1);
    r.finalize();
  });
}

TEST_F(DdpReducerProtocol, FinalizeWithAMissingGradientNamesItThenTheReducerRefuses) {
  run([](Reducer& r) {
    r.mark_grad_ready(1);
    EXPECT_EQ(error_of([&] { r.finalize(); }),
              "PG_ERR_INVALID_ARGUMENT: ddp: finalize(): the gradient of parameter 'p0' "
              "(index 0, f32 x 3) was never marked ready in this backward pass; mark it, "
              "declare it in prepare_for_backward(unused), or set find_unused_parameters");
    EXPECT_NE(error_of([&] { r.mark_grad_ready(0); }).find("unusable after an earlier failure"),
              std::string::npos);
  });
}

TEST_F(DdpReducerProtocol, NoSyncMustCoverTheWholePass) {
  run([](Reducer& r) {
    {
      NoSync guard = r.no_sync();
      r.mark_grad_ready(0);
    }
    EXPECT_NE(error_of([&] { r.finalize(); }).find("finalized after no_sync() ended"),
              std::string::npos);
    r.mark_grad_ready(0);  // the failed pass ended; the Reducer is still usable
    r.mark_grad_ready(1);
    r.finalize();
  });
}

TEST(DdpReducerMissing, MissingGradientOnEveryRankFailsEveryRankWithoutHanging) {
  const auto start = Clock::now();
  run_ranks(2, [](Group& group, int) {
    FloatParams p({3, 2, 2});
    ReducerOptions o;
    o.first_bucket_bytes = 0;
    o.bucket_cap_bytes = 0;
    Reducer reducer(group, p.parameters(), o);
    reducer.mark_grad_ready(2);  // launches bucket 0; p1 and p0 never come
    EXPECT_THROW(reducer.finalize(), Error);
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace procgroup::ddp::testing
