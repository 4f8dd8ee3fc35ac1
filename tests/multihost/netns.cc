#include "netns.h"

#include <signal.h>
#include <unistd.h>

#include <sstream>

#include "subprocess.h"

namespace procgroup::testing {

bool TwoHosts::ip(const std::vector<std::string>& args, std::string* err) const {
  std::vector<std::string> argv{IP_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = run(argv, 20);
  if (err != nullptr) *err = r.err;
  return r.exit_code == 0;
}

std::unique_ptr<TwoHosts> TwoHosts::create(std::string* why_not) {
  if (geteuid() != 0) {
    *why_not = "network namespaces need root; run the test as root to simulate two hosts";
    return nullptr;
  }
  if (access(IP_PATH, X_OK) != 0) {
    *why_not = "`ip` (iproute2) is not installed";
    return nullptr;
  }
  std::unique_ptr<TwoHosts> net(new TwoHosts());
  const std::string id = std::to_string(getpid());
  for (int h = 0; h < 2; ++h) {
    net->ns_[h] = "pgmh" + id + (h == 0 ? "a" : "b");
    net->veth_[h] = "pgv" + id + (h == 0 ? "a" : "b");  // at most 15 characters
  }
  std::string err;
  for (int h = 0; h < 2; ++h) {
    if (!net->ip({"netns", "add", net->ns_[h]}, &err)) {
      *why_not = "cannot create a network namespace (no CAP_SYS_ADMIN here?): " + err;
      return nullptr;
    }
    net->created_[h] = true;
  }
  const std::vector<std::vector<std::string>> steps = {
      {"link", "add", net->veth_[0], "type", "veth", "peer", "name", net->veth_[1]},
      {"link", "set", net->veth_[0], "netns", net->ns_[0]},
      {"link", "set", net->veth_[1], "netns", net->ns_[1]},
      {"-n", net->ns_[0], "addr", "add", "10.77.0.1/24", "dev", net->veth_[0]},
      {"-n", net->ns_[1], "addr", "add", "10.77.0.2/24", "dev", net->veth_[1]},
      {"-n", net->ns_[0], "link", "set", "lo", "up"},
      {"-n", net->ns_[1], "link", "set", "lo", "up"},
      {"-n", net->ns_[0], "link", "set", net->veth_[0], "up"},
      {"-n", net->ns_[1], "link", "set", net->veth_[1], "up"},
  };
  for (const auto& step : steps) {
    if (!net->ip(step, &err)) {
      *why_not = "setting up the veth pair failed: " + err;
      return nullptr;  // the destructor removes what exists
    }
  }
  return net;
}

TwoHosts::~TwoHosts() {
  for (int h = 0; h < 2; ++h) {
    if (!created_[h]) continue;
    // Whatever a failed test left running in there: only processes it started can be inside.
    ProcessResult pids = run({IP_PATH, "netns", "pids", ns_[h]}, 20);
    std::istringstream in(pids.out);
    pid_t pid;
    while (in >> pid) ::kill(pid, SIGKILL);
    ip({"netns", "del", ns_[h]});  // also removes the veth end inside it
  }
}

std::vector<std::string> TwoHosts::exec_prefix(int host) const {
  return {IP_PATH, "netns", "exec", ns_[host]};
}

bool TwoHosts::cut() { return ip({"-n", ns_[0], "link", "set", veth_[0], "down"}); }

}  // namespace procgroup::testing
