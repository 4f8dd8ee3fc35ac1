// The progress display: a bar redrawn in place (carriage return, erase line) with the
// epoch, percentage, samples/s and ETA, or plain lines; and duration formatting.
#include "progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace fashion_mnist {
namespace {

std::string drain(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  return s;
}

TEST(TrainProgress, BarRedrawsInPlaceAndClearsAtTheEnd) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(ProgressMode::kBar, 3, 0, 10, 5.0, f);
    p.start_epoch(1);
    p.update(5, 640, 0.5, 0.8);
    p.update(10, 1280, 0.4, 0.85);  // the last step always draws
    p.end_epoch();
  }
  const std::string s = drain(f);
  std::fclose(f);
  EXPECT_NE(s.find("\r\033[Kepoch 2/3 [============>           ]  50% loss 0.5000 acc 80.00%"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("[========================] 100%"), std::string::npos) << s;
  EXPECT_NE(s.find("samples/s | ETA "), std::string::npos) << s;
  EXPECT_EQ(s.find('\n'), std::string::npos) << "a bar never scrolls";
  EXPECT_EQ(s.substr(s.size() - 4), "\r\033[K") << "the bar is erased for the summary line";
}

TEST(TrainProgress, LinesModePrintsWholeLinesAndNoEscapes) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p(ProgressMode::kLines, 2, 0, 4, 0.0, f);
    p.start_epoch(0);
    for (int s = 1; s <= 4; ++s) p.update(s, 64 * s, 1.0, 0.5);
    p.end_epoch();
  }
  const std::string s = drain(f);
  std::fclose(f);
  EXPECT_NE(s.find("epoch 1/2  25% (step 1/4) loss 1.0000 acc 50.00%"), std::string::npos) << s;
  EXPECT_NE(s.find("epoch 1/2  75% (step 3/4)"), std::string::npos) << s;
  EXPECT_EQ(s.find("(step 4/4)"), std::string::npos) << "the epoch summary reports the end";
  EXPECT_EQ(s.find('\r'), std::string::npos);
  EXPECT_EQ(s.find('\033'), std::string::npos);
}

TEST(TrainProgress, NoneWritesNothingAndAutoIsLinesOffATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress none(ProgressMode::kNone, 1, 0, 2, 0.0, f);
  none.start_epoch(0);
  none.update(1, 1, 1, 1);
  EXPECT_EQ(drain(f), "");
  Progress automatic(ProgressMode::kAuto, 1, 0, 2, 0.0, f);
  EXPECT_EQ(automatic.mode(), ProgressMode::kLines);
  std::fclose(f);
}

TEST(TrainProgress, Durations) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(65.4), "1:05");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-3), "0:00");
}

}  // namespace
}  // namespace fashion_mnist
