// Raw Gloo context setup for collbench --direct (see gloo_rendezvous.h).
#include "gloo_rendezvous.h"

#include <arpa/inet.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace procgroup::bench {
namespace {

const char* env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// The store directory; rank 0 creates it and removes it when this goes away.
class StoreDir {
 public:
  explicit StoreDir(Communicator& comm) : owner_(comm.rank() == 0) {
    std::array<char, 4096> path{};
    if (owner_) {
      const std::string base = env_or("PROCGROUP_BENCH_GLOO_STORE_DIR", env_or("TMPDIR", "/tmp"));
      const std::string pattern = base + "/collbench-gloo-XXXXXX";
      if (pattern.size() < path.size()) {
        std::memcpy(path.data(), pattern.c_str(), pattern.size() + 1);
        if (mkdtemp(path.data()) == nullptr) path[0] = '\0';
      }
    }
    comm.broadcast(path.data(), path.size(), 0);  // every rank takes part, even after a failure
    path.back() = '\0';
    path_ = path.data();
    if (path_.empty()) {
      throw std::runtime_error(
          "gloo direct: rank 0 could not create a store directory (set "
          "PROCGROUP_BENCH_GLOO_STORE_DIR to a writable directory)");
    }
  }
  ~StoreDir() {
    std::error_code ignored;
    if (owner_) std::filesystem::remove_all(path_, ignored);
  }
  StoreDir(const StoreDir&) = delete;
  StoreDir& operator=(const StoreDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  bool owner_;
  std::string path_;
};

bool is_loopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  }
  return sa->sa_family == AF_INET6 &&
         IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
}

// Where the device listens, chosen as the gloo backend chooses: PROCGROUP_SOCKET_IFNAME, else
// loopback for a loopback (or absent) MASTER_ADDR, else the local address routing to it.
gloo::transport::tcp::attr listen_attr() {
  gloo::transport::tcp::attr attr;
  const char* ifname = env_or("PROCGROUP_SOCKET_IFNAME", nullptr);
  if (ifname != nullptr) {
    attr.iface = ifname;
    return attr;
  }
  attr.hostname = "127.0.0.1";
  const char* master = env_or("MASTER_ADDR", nullptr);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* list = nullptr;
  if (master == nullptr || getaddrinfo(master, "9", &hints, &list) != 0) return attr;
  if (!is_loopback(list->ai_addr)) {
    // Connecting a UDP socket sends nothing; the kernel picks the route's source address.
    const int fd = socket(list->ai_family, SOCK_DGRAM, 0);
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    char host[NI_MAXHOST];
    if (fd >= 0 && connect(fd, list->ai_addr, list->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        getnameinfo(reinterpret_cast<sockaddr*>(&local), len, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) == 0) {
      attr.hostname = host;
    }
    if (fd >= 0) close(fd);
  }
  freeaddrinfo(list);
  return attr;
}

}  // namespace

std::shared_ptr<gloo::Context> connect_gloo(Communicator& comm, std::chrono::milliseconds timeout) {
  StoreDir dir(comm);
  std::shared_ptr<gloo::rendezvous::Context> context;
  try {
    auto device = gloo::transport::tcp::CreateDevice(listen_attr());
    context = std::make_shared<gloo::rendezvous::Context>(comm.rank(), comm.size());
    context->setTimeout(timeout);
    gloo::rendezvous::FileStore store(dir.path());
    context->connectFullMesh(store, device);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("gloo direct: connecting the raw Gloo context failed: ") +
                             e.what());
  }
  comm.barrier();  // every rank has read the store: rank 0 may now remove it
  return context;
}

}  // namespace procgroup::bench
