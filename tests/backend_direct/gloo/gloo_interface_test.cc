// Where the gloo plugin's TCP device listens: the local address that routes to the master,
// or PROCGROUP_SOCKET_IFNAME, and a clear configuration error for a missing interface.
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>

#include <string>

#include "gloo_test_support.h"

namespace procgroup::gloo_test {
namespace {

// The first non-loopback IPv4 address of this machine, or "" when it has none.
std::string external_ipv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char host[NI_MAXHOST];
    if (getnameinfo(i->ifa_addr, sizeof(sockaddr_in), host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) == 0 &&
        std::string(host).rfind("127.", 0) != 0) {
      found = host;
    }
  }
  freeifaddrs(list);
  return found;
}

bool logged_line_with(const std::string& needle) {
  for (const std::string& line : logged()) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

void allreduce_works(RankEnv& r) {
  float x = static_cast<float>(r.rank + 1);
  pg_buffer_t b = cpu(&x, 1, PG_DTYPE_F32);
  std::string err;
  r.expect_status(r.run(make_op(PG_OP_ALLREDUCE, b, b), &err), PG_OK, "allreduce " + err);
  r.expect(x == static_cast<float>(r.size * (r.size + 1) / 2), "allreduce result");
}

TEST(GlooInterface, ListensWhereTheMasterAddressRoutes) {
  const std::string ip = external_ipv4();
  if (ip.empty()) GTEST_SKIP() << "no non-loopback IPv4 address on this machine";
  WorldOptions opts;
  opts.master_addr = ip;  // the route to our own address: the ranks talk over it
  run_world(3, opts, [ip](RankEnv& r) {
    r.expect(logged_line_with("listening on address " + ip), "listens on " + ip);
    allreduce_works(r);
  });
}

TEST(GlooInterface, HonoursProcgroupSocketIfname) {
  WorldOptions opts;
  opts.env = {{"PROCGROUP_SOCKET_IFNAME", "lo"}};
  opts.master_addr = "203.0.113.1";  // unroutable: the interface must win over the master
  run_world(2, opts, [](RankEnv& r) {
    r.expect(logged_line_with("listening on interface lo"), "listens on lo");
    allreduce_works(r);
  });
}

TEST(GlooInterface, AMissingInterfaceIsAConfigError) {
  WorldOptions opts;
  opts.env = {{"PROCGROUP_SOCKET_IFNAME", "nosuchif0"}};
  opts.create_group = false;
  run_world(1, opts, [](RankEnv& r) {
    pg_backend_group_t g = nullptr;
    const pg_status_t st = create_group(*r.ops, *r.store, 0, 1, 2000, &g);
    const std::string err = take_error();
    r.expect_status(st, PG_ERR_CONFIG, "group_create: " + err);
    r.expect(err.find("nosuchif0") != std::string::npos, "names the interface: " + err);
  });
}

// Planned once: gloo acts on the plan the core sent (plugin_harness.h).
TEST(GlooInterface, TakesTheCoresPlan) { run_world(2, {}, plugin_harness::expect_plan_taken); }

}  // namespace
}  // namespace procgroup::gloo_test
