// The wire format byte for byte, the decoder's failure modes, the shared store semantics
// (counters, compare_set, key checks) and the HMAC answer.
#include "store/store_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/store_auth.h"

namespace procgroup::detail {
namespace {

using ::testing::HasSubstr;

TEST(StoreProtocolTest, FrameLayoutIsBigEndianWithALengthHeader) {
  Bytes frame = FrameWriter(Op::kGet).i64(258).str("ab").finish();
  Bytes expected = {0, 0, 0, 0, 0,   0,  0, 15,  // body length
                    2,                           // GET
                    0, 0, 0, 0, 0,   0,  1, 2,   // timeout 258
                    0, 0, 0, 2, 'a', 'b'};       // key
  EXPECT_EQ(frame, expected);
  EXPECT_EQ(load_be64(frame.data()), 15u);
}

TEST(StoreProtocolTest, ReaderRoundTripsEveryFieldType) {
  Bytes frame = FrameWriter(Op::kCompareSet)
                    .u8(7)
                    .u32(0xdeadbeef)
                    .i64(-5)
                    .str("key")
                    .raw(Bytes{9, 9})
                    .finish();
  FrameReader r(std::span<const uint8_t>(frame).subspan(kFrameHeaderBytes));
  EXPECT_EQ(static_cast<Op>(r.u8()), Op::kCompareSet);
  EXPECT_EQ(r.u8(), 7);
  EXPECT_EQ(r.u32(), 0xdeadbeefu);
  EXPECT_EQ(r.i64(), -5);
  EXPECT_EQ(as_chars(r.str("key", 10)), "key");
  EXPECT_EQ(r.raw(2, "tail").size(), 2u);
  EXPECT_TRUE(r.finish()) << r.error();
}

TEST(StoreProtocolTest, ReaderFailuresStickAndNameTheField) {
  Bytes body = {0, 0, 0, 9, 'a'};  // a string claiming 9 bytes, holding 1
  FrameReader short_read(body);
  short_read.str("value", 100);
  EXPECT_TRUE(short_read.failed());
  EXPECT_EQ(short_read.i64(), 0);  // later reads are inert
  EXPECT_FALSE(short_read.finish());
  EXPECT_THAT(short_read.error(), HasSubstr("value"));

  FrameReader too_long(body);
  too_long.str("key", 4);
  EXPECT_FALSE(too_long.finish());
  EXPECT_THAT(too_long.error(), HasSubstr("key of 9 bytes exceeds the limit of 4"));

  Bytes trailing = {1, 2};
  FrameReader extra(trailing);
  extra.u8();
  EXPECT_FALSE(extra.finish());
  EXPECT_THAT(extra.error(), HasSubstr("trailing"));
}

TEST(StoreProtocolTest, OnlyRequestOpcodesAreRequests) {
  EXPECT_TRUE(is_request(static_cast<uint8_t>(Op::kSet)));
  EXPECT_TRUE(is_request(static_cast<uint8_t>(Op::kAuth)));
  EXPECT_FALSE(is_request(0));
  EXPECT_FALSE(is_request(static_cast<uint8_t>(Op::kHello)));
  EXPECT_FALSE(is_request(0xff));
}

TEST(StoreProtocolTest, LimitsAreConsistent) {
  // The largest legitimate request (COMPARE_SET with two maximal values) fits in a frame.
  EXPECT_GE(kMaxFrameBytes, 1 + 3 * 4 + kMaxKeyBytes + 2 * kMaxValueBytes);
  EXPECT_GE(kMaxFrameBytes, 1 + 8 + 4 + kMaxKeysPerRequest * (4 + kMaxKeyBytes));
  EXPECT_GE(kMaxUnauthenticatedFrameBytes, 1 + kMacBytes + kNonceBytes);
}

TEST(StoreSemanticsTest, CountersAreDecimalInt64) {
  EXPECT_EQ(apply_add("k", nullptr, 3).value(), 3);
  Bytes twelve = {'1', '2'};
  EXPECT_EQ(apply_add("k", &twelve, -20).value(), -8);
  for (std::string bad : {"", "abc", " 1", "1 ", "+1", "1.5", "99999999999999999999"}) {
    Bytes v(bad.begin(), bad.end());
    auto r = apply_add("counter", &v, 1);
    EXPECT_EQ(r.status().code(), PG_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("'counter'"));
  }
  Bytes max = counter_bytes(INT64_MAX);
  EXPECT_FALSE(apply_add("k", &max, 1).ok());
  Bytes min = counter_bytes(INT64_MIN);
  EXPECT_FALSE(apply_add("k", &min, -1).ok());
  EXPECT_EQ(apply_add("k", &min, 1).value(), INT64_MIN + 1);
}

TEST(StoreSemanticsTest, CompareMatchesTreatsEmptyAsAbsent) {
  Bytes v = {'x'};
  Bytes empty;
  EXPECT_TRUE(compare_matches(nullptr, {}));
  EXPECT_FALSE(compare_matches(nullptr, v));
  EXPECT_TRUE(compare_matches(&v, v));
  EXPECT_FALSE(compare_matches(&v, {}));
  EXPECT_TRUE(compare_matches(&empty, {}));
}

TEST(StoreSemanticsTest, KeysAreCheckedAndPrintedSafely) {
  EXPECT_TRUE(validate_key("ok").ok());
  EXPECT_EQ(validate_key("").code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(validate_key(std::string(kMaxKeyBytes, 'k')).ok());
  EXPECT_EQ(validate_key(std::string(kMaxKeyBytes + 1, 'k')).code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(validate_value("k", kMaxValueBytes + 1).code(), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(printable_key(std::string("a\n\0'", 4)), "'a\\x0a\\x00\\x27'");
  EXPECT_THAT(printable_key(std::string(500, 'z')), HasSubstr("(500 bytes)"));
  std::vector<std::string> keys = {"a", "b", "c", "d", "e", "f"};
  EXPECT_EQ(printable_keys(keys), "'a', 'b', 'c', 'd' and 2 more");
}

TEST(StoreAuthTest, AnswerDependsOnTokenAndNonce) {
  Nonce n1{};
  Nonce n2{};
  n2[0] = 1;
  Mac a = auth_answer("token", n1);
  EXPECT_EQ(a, auth_answer("token", n1));
  EXPECT_NE(a, auth_answer("token", n2));
  EXPECT_NE(a, auth_answer("tokem", n1));
  EXPECT_TRUE(auth_verify("token", n1, a));
  EXPECT_FALSE(auth_verify("token", n2, a));
  EXPECT_FALSE(auth_verify("other", n1, a));
  EXPECT_FALSE(auth_verify("token", n1, std::span<const uint8_t>(a).first(31)));
  EXPECT_FALSE(auth_verify("", n1, auth_answer("", n1)));  // no token: nothing verifies
}

TEST(StoreAuthTest, AnswerIsHmacSha256OfNonceAndContext) {
  // Known answer, computed independently: Python's
  //   hmac.new(b"token", bytes(range(32)) + b"procgroup-store-auth-v1", "sha256")
  Nonce nonce{};
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(i);
  Mac mac = auth_answer("token", nonce);
  std::string hex;
  for (uint8_t b : mac) hex += fmt::format("{:02x}", b);
  EXPECT_EQ(hex, "84cf93bfc3c722026072b18a34dcb68227c0861c37d54a2682a013844edc18a3");
}

TEST(StoreAuthTest, NoncesAreFresh) {
  auto n1 = make_nonce();
  auto n2 = make_nonce();
  ASSERT_TRUE(n1.ok() && n2.ok());
  EXPECT_NE(n1.value(), n2.value());
}

}  // namespace
}  // namespace procgroup::detail
