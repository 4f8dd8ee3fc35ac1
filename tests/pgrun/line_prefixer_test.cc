// LinePrefixer in-process: what each feed() writes at once, byte for byte. A carriage return
// ends a segment, so a progress bar redrawn in place reaches the output live.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "output_prefixer.h"

namespace procgroup::pgrun {
namespace {

// The prefixer writes into a pipe; written() returns what arrived since the last call.
class LinePrefixerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::pipe2(fds_, O_NONBLOCK | O_CLOEXEC), 0);
    prefixer_.emplace("[rank 0] ", fds_[1]);
  }
  void TearDown() override {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  std::string written() {
    std::string out;
    char buffer[4096];
    ssize_t n = 0;
    while ((n = ::read(fds_[0], buffer, sizeof(buffer))) > 0) out.append(buffer, n);
    return out;
  }
  std::string feed(std::string_view data) {
    prefixer_->feed(data);
    return written();
  }

  int fds_[2] = {-1, -1};
  std::optional<LinePrefixer> prefixer_;
};

TEST_F(LinePrefixerTest, WholeLinesOnlyWithoutCarriageReturns) {
  EXPECT_EQ(feed("hello\nwor"), "[rank 0] hello\n");
  EXPECT_EQ(feed("ld"), "");
  EXPECT_EQ(feed("\n"), "[rank 0] world\n");
  EXPECT_EQ(feed("tail"), "");
  prefixer_->finish();
  EXPECT_EQ(written(), "[rank 0] tail\n");
}

TEST_F(LinePrefixerTest, TrailingCarriageReturnSegmentsAreWrittenAtOnce) {
  EXPECT_EQ(feed("10%\r"), "[rank 0] 10%\r");
  EXPECT_EQ(feed("20%\r30%\r"), "[rank 0] 20%\r[rank 0] 30%\r");
  EXPECT_EQ(feed("done\n"), "[rank 0] done\n");
}

TEST_F(LinePrefixerTest, BarAfterALeadingCarriageReturnIsShownLive) {
  // fashion_mnist's and tqdm's style: "\r" (and an erase) first, then the bar, no terminator.
  EXPECT_EQ(feed("\r\033[Kepoch 1 [=>  ] 10%"), "[rank 0] \033[Kepoch 1 [=>  ] 10%\r");
  EXPECT_EQ(feed("\r\033[Kepoch 1 [==> ] 50%"), "[rank 0] \033[Kepoch 1 [==> ] 50%\r");
  // The end-of-epoch erase, then the summary line: nothing is written twice for the bar.
  EXPECT_EQ(feed("\r\033[K"), "[rank 0] \033[K\r");
  EXPECT_EQ(feed("epoch 1 loss 0.5\n"), "[rank 0] \033[Kepoch 1 loss 0.5\n");
  EXPECT_EQ(feed("plain"), "") << "text not after a '\\r' still waits for its line end";
}

TEST_F(LinePrefixerTest, ShownTextThatGrowsIsRewrittenWhole) {
  EXPECT_EQ(feed("\rstep 1"), "[rank 0] step 1\r");
  EXPECT_EQ(feed(" of 9"), "[rank 0] step 1 of 9\r");
  EXPECT_EQ(feed("\n"), "[rank 0] step 1 of 9\n");
}

TEST_F(LinePrefixerTest, CrLfIsOneLineEndEvenWhenSplitAcrossReads) {
  EXPECT_EQ(feed("dos line\r\nnext\r\n"), "[rank 0] dos line\r\n[rank 0] next\r\n");
  EXPECT_EQ(feed("split\r"), "[rank 0] split\r");
  EXPECT_EQ(feed("\n"), "\n");
  EXPECT_EQ(feed("\n"), "[rank 0] \n") << "an empty line after a complete CRLF is a line";
}

TEST_F(LinePrefixerTest, EveryWriteEndsAtColumnZero) {
  // So another rank's line never continues this rank's text mid-line.
  for (std::string_view data : {"\ra", "b", "\r", "\rc\rd", "e\n", "f\r\rg", "\r\n", "h"}) {
    const std::string out = feed(data);
    if (!out.empty()) {
      EXPECT_TRUE(out.back() == '\n' || out.back() == '\r') << out;
    }
  }
}

TEST_F(LinePrefixerTest, LongTextAfterACarriageReturnWaitsForItsEnd) {
  const std::string long_tail(LinePrefixer::kMaxShownTail + 1, 'x');
  EXPECT_EQ(feed("\r" + long_tail), "");
  EXPECT_EQ(feed("\n"), "[rank 0] " + long_tail + "\n");
}

}  // namespace
}  // namespace procgroup::pgrun
