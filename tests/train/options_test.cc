// The command line: every numeric flag refuses a value out of its range naming that range
// (not CLI11's 300-digit bounds of a double), NaN is no number, and the test hooks stay off
// unless asked for.
#include "options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fashion_mnist {
namespace {

struct Parsed {
  std::optional<Options> options;
  int exit_code = -1;
  std::string err;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fashion_mnist");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  Parsed p;
  ::testing::internal::CaptureStderr();
  p.options = parse_options(static_cast<int>(argv.size()), argv.data(), p.exit_code);
  p.err = ::testing::internal::GetCapturedStderr();
  return p;
}

TEST(TrainOptions, EveryNumericFlagNamesItsRealRange) {
  const std::vector<std::vector<std::string>> cases = {
      {"--epochs", "-1", "1..1000000"},
      {"--epochs", "99999999999", "1..1000000"},
      {"--batch-size", "0", "1..16777216"},
      {"--lr", "-0.5", "0..1000"},
      {"--lr", "nan", "0..1000"},
      {"--momentum", "2", "0..1"},
      {"--weight-decay", "inf", "0..1"},
      {"--seed", "-1", "0..18446744073709551615"},
      {"--train-limit", "-5", "0..4294967295"},
      {"--test-limit", "x", "0..4294967295"},
      {"--progress-interval", "-1", "0..86400"},
      {"--eval-batch", "0", "1..16777216"},
      {"--blas-threads", "-2", "0..1024"},
      {"--first-bucket-kb", "0", "1..4194304"},
      {"--bucket-cap-kb", "0", "1..4194304"},
      {"--measure-overhead", "-1", "0..1000000"},
      {"--overhead-warmup", "-1", "0..1000000"},
      {"--stall-at-step", "-1", "0..9223372036854775807"},
      {"--stall-rank", "-1", "0..2147483647"},
  };
  for (const auto& c : cases) {
    const Parsed p = parse({c[0], c[1]});
    EXPECT_FALSE(p.options) << c[0] << " " << c[1];
    EXPECT_EQ(p.exit_code, 2) << c[0] << " " << c[1];
    const std::string expected = c[0] + ": '" + c[1] + "' is not ";
    EXPECT_NE(p.err.find(expected), std::string::npos) << p.err;
    EXPECT_NE(p.err.find(" in " + c[2] + "\n"), std::string::npos) << p.err;
    EXPECT_LT(p.err.size(), 300u) << p.err;
  }
}

TEST(TrainOptions, ValuesAtTheBoundsAreAccepted) {
  const Parsed p = parse({"--epochs", "1000000", "--batch-size", "1", "--lr", "0", "--seed",
                          "18446744073709551615", "--train-limit", "0", "--blas-threads", "0"});
  ASSERT_TRUE(p.options) << p.err;
  EXPECT_EQ(p.options->train.epochs, 1000000);
  EXPECT_EQ(p.options->train.seed, 18446744073709551615ull);
}

TEST(TrainOptions, TheStallHookIsOffUnlessAskedFor) {
  const Parsed off = parse({});
  ASSERT_TRUE(off.options) << off.err;
  EXPECT_FALSE(off.options->train.stall_at_step.has_value());
  const Parsed on = parse({"--stall-at-step", "0", "--stall-marker", "/tmp/m"});
  ASSERT_TRUE(on.options) << on.err;
  EXPECT_EQ(on.options->train.stall_at_step, 0);
  const Parsed unmarked = parse({"--stall-at-step", "3"});
  EXPECT_NE(unmarked.err.find("--stall-at-step needs --stall-marker PATH"), std::string::npos);
}

}  // namespace
}  // namespace fashion_mnist
