// The log's level parsing: the four names in any case, nothing else.
#include "common/log.h"

#include <gtest/gtest.h>

namespace procgroup::detail {
namespace {

TEST(LogLevel, NamesParseInAnyCase) {
  EXPECT_EQ(parse_log_level("error"), kLogError);
  EXPECT_EQ(parse_log_level("WARN"), kLogWarn);
  EXPECT_EQ(parse_log_level("Info"), kLogInfo);
  EXPECT_EQ(parse_log_level("dEbUg"), kLogDebug);
}

TEST(LogLevel, AnythingElseIsRejected) {
  for (const char* text : {"", "verbose", "warning", "trace", "3", " debug", "debug\n", "inf"})
    EXPECT_EQ(parse_log_level(text), std::nullopt) << '"' << text << '"';
}

}  // namespace
}  // namespace procgroup::detail
