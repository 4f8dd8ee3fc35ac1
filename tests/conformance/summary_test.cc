// The summary `conformance_test --backend` prints at the end: runs the binary on
// loopback_p2p (which declares only send and recv, so the core emulates every collective)
// for allreduce on 2 ranks and checks the table row and the declared-versus-ran line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Output {
  int status = -1;
  std::string output;
};

Output run_command(const std::string& command) {
  Output r;
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) r.output.append(buffer, n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The line of `text` that starts with `prefix`, or "".
std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(ConformanceSummary, AllreduceOnLoopbackP2pIsEmulatedAndPasses) {
  const Output r = run_command(std::string("'") + PG_CONFORMANCE_BIN +
                               "' --backend loopback_p2p --ranks threads "
                               "--gtest_filter='*Allreduce*world2*'");
  ASSERT_EQ(r.status, 0) << r.output;
  ASSERT_NE(r.output.find("[ summary  ] loopback_p2p"), std::string::npos) << r.output;

  const std::vector<std::string> header =
      words(line_starting(r.output, std::string(18, ' ') + "f32"));
  EXPECT_EQ(header,
            (std::vector<std::string>{"f32", "f64", "f16", "bf16", "i8", "u8", "i32", "i64"}))
      << r.output;
  const std::vector<std::string> allreduce = words(line_starting(r.output, "  allreduce      "));
  ASSERT_EQ(allreduce.size(), 9u) << r.output;
  for (size_t i = 1; i < allreduce.size(); ++i)
    EXPECT_EQ(allreduce[i], "ok") << "dtype column " << i << "\n" << r.output;
  // Nothing else ran.
  const std::vector<std::string> broadcast = words(line_starting(r.output, "  broadcast      "));
  EXPECT_EQ(broadcast,
            (std::vector<std::string>{"broadcast", "-", "-", "-", "-", "-", "-", "-", "-"}))
      << r.output;

  EXPECT_EQ(line_starting(r.output, "  native ops:"), "  native ops:        send recv") << r.output;
  const std::string declared = line_starting(r.output, "  allreduce: ");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(
      declared, m,
      std::regex(R"(  allreduce: not declared \(emulated by the core: (\d+)/(\d+) passed\))")))
      << declared << "\n"
      << r.output;
  EXPECT_EQ(m[1], m[2]);
  EXPECT_GT(std::stoi(m[1]), 0);
  EXPECT_EQ(line_starting(r.output, "  gather: "), "  gather: not declared (not run)") << r.output;
}

}  // namespace
