#include "free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "unique_fd.h"

namespace procgroup::pgrun {

FreePort pick_free_port() {
  FreePort result;
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) {
    result.error = std::string("socket: ") + std::strerror(errno);
    return result;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(sock.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    result.error = std::string("bind 127.0.0.1:0: ") + std::strerror(errno);
    return result;
  }
  socklen_t len = sizeof(addr);
  if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    result.error = std::string("getsockname: ") + std::strerror(errno);
    return result;
  }
  // Never listened on or connected, so closing leaves no TIME_WAIT entry holding the port.
  result.port = ntohs(addr.sin_port);
  return result;
}

}  // namespace procgroup::pgrun
