// Two network namespaces joined by a veth pair, standing in for two hosts on one wire:
// host 0 is 10.77.0.1, host 1 is 10.77.0.2. Needs root (and `ip` from iproute2); names
// carry this process's pid, so parallel tests do not collide. The destructor kills the
// processes still inside the namespaces and deletes them, so a failed test leaves nothing.
//
//   std::string why;
//   auto net = TwoHosts::create(&why);
//   if (!net) GTEST_SKIP() << why;
//   run(net->exec_on(0, {"pgrun", ...}), ...);
//   net->cut();                                  // the link goes down
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace procgroup::testing {

class TwoHosts {
 public:
  static std::unique_ptr<TwoHosts> create(std::string* why_not);
  ~TwoHosts();
  TwoHosts(const TwoHosts&) = delete;
  TwoHosts& operator=(const TwoHosts&) = delete;

  std::string address(int host) const { return host == 0 ? "10.77.0.1" : "10.77.0.2"; }
  // The prefix that runs a command inside host's namespace.
  std::vector<std::string> exec_prefix(int host) const;
  // Takes host 0's end of the link down; true on success.
  bool cut();

 private:
  TwoHosts() = default;
  bool ip(const std::vector<std::string>& args, std::string* err = nullptr) const;
  std::string ns_[2];
  std::string veth_[2];
  bool created_[2] = {false, false};
};

}  // namespace procgroup::testing
