#include "common/status.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace procgroup::detail {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return make_error(PG_ERR_INVALID_ARGUMENT, "{} is not positive", v);
  return v;
}

Status double_it(int v, int* out) {
  PG_ASSIGN_OR_RETURN(int x, parse_positive(v));
  *out = 2 * x;
  return ok_status();
}

TEST(Status, ResultAndMacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(double_it(4, &out).ok());
  EXPECT_EQ(out, 8);
  Status s = double_it(-1, &out);
  EXPECT_EQ(s.code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.message(), "-1 is not positive");
  EXPECT_EQ(s.with_context("parsing").message(), "parsing: -1 is not positive");
  EXPECT_EQ(s.to_string(), "PG_ERR_INVALID_ARGUMENT: -1 is not positive");
}

TEST(Status, GuardSetsLastErrorAndCatchesExceptions) {
  set_last_error("");
  EXPECT_EQ(c_guard("f", [] { return ok_status(); }), PG_OK);
  EXPECT_STREQ(last_error(), "");
  EXPECT_EQ(c_guard("f", [] { return make_error(PG_ERR_TIMEOUT, "slow"); }), PG_ERR_TIMEOUT);
  EXPECT_STREQ(last_error(), "slow");
  EXPECT_EQ(c_guard("f", []() -> Status { throw std::runtime_error("boom"); }), PG_ERR_INTERNAL);
  EXPECT_NE(std::string(last_error()).find("boom"), std::string::npos);
  EXPECT_EQ(c_guard("f", []() -> Status { throw std::bad_alloc(); }), PG_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(c_guard("f", []() -> Status { throw 42; }), PG_ERR_INTERNAL);
  // PG_PENDING is not a failure: it leaves the previous message alone.
  set_last_error("kept");
  EXPECT_EQ(c_guard("f", [] { return Status(PG_PENDING, ""); }), PG_PENDING);
  EXPECT_STREQ(last_error(), "kept");
}

TEST(Status, LastErrorIsPerThread) {
  set_last_error("main");
  std::thread([] {
    EXPECT_STREQ(last_error(), "");
    set_last_error("other");
  }).join();
  EXPECT_STREQ(last_error(), "main");
}

}  // namespace
}  // namespace procgroup::detail
