#include "store_test_util.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace procgroup::detail::store_testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/pg_store_test.XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

Bytes to_bytes(std::string_view s) { return Bytes(s.begin(), s.end()); }
std::string to_text(const Bytes& b) { return std::string(b.begin(), b.end()); }

RawConnection::RawConnection(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto fd =
      connect_once(reinterpret_cast<sockaddr*>(&addr), sizeof addr, Deadline::after(Millis(5000)));
  if (fd.ok()) fd_ = std::move(fd).value();
}

bool RawConnection::send(std::span<const uint8_t> data) {
  return send_all(fd_.get(), data, Deadline::after(Millis(5000))).ok();
}

std::optional<Bytes> RawConnection::read_frame(Millis timeout) {
  Deadline deadline = Deadline::after(timeout);
  uint8_t header[kFrameHeaderBytes];
  if (!recv_exact(fd_.get(), header, deadline).ok()) return std::nullopt;
  uint64_t length = load_be64(header);
  if (length == 0 || length > kMaxFrameBytes) return std::nullopt;
  Bytes body(length);
  if (!recv_exact(fd_.get(), body, deadline).ok()) return std::nullopt;
  return body;
}

std::optional<Nonce> RawConnection::read_hello(bool* auth_required) {
  auto body = read_frame();
  if (!body) return std::nullopt;
  FrameReader r(*body);
  auto op = static_cast<Op>(r.u8());
  uint32_t magic = r.u32();
  uint8_t version = r.u8();
  bool auth = r.u8() != 0;
  auto nonce = r.raw(kNonceBytes, "nonce");
  if (op != Op::kHello || !r.finish() || magic != kProtocolMagic || version != kProtocolVersion) {
    return std::nullopt;
  }
  if (auth_required != nullptr) *auth_required = auth;
  Nonce out{};
  std::copy(nonce.begin(), nonce.end(), out.begin());
  return out;
}

bool RawConnection::wait_closed(Millis timeout) {
  Deadline deadline = Deadline::after(timeout);
  uint8_t buf[4096];
  for (;;) {
    auto ready = wait_fd(fd_.get(), POLLIN, deadline);
    if (!ready.ok() || ready.value() == 0) return false;
    ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0 && errno != EINTR && errno != EAGAIN) return true;  // reset
  }
}

void RawConnection::shutdown_write() { ::shutdown(fd_.get(), SHUT_WR); }

std::optional<std::pair<pg_status_t, std::string>> as_error(const Bytes& body) {
  FrameReader r(body);
  if (static_cast<Op>(r.u8()) != Op::kError) return std::nullopt;
  auto code = static_cast<pg_status_t>(r.u32());
  std::string message(as_chars(r.str("message", kMaxFrameBytes)));
  if (!r.finish()) return std::nullopt;
  return std::make_pair(code, message);
}

Child::Child(const std::function<int()>& body) {
  pid_ = ::fork();
  if (pid_ == 0) {
    int code = 100;
    try {
      code = body();
    } catch (...) {
      code = 101;
    }
    ::_exit(code);  // no atexit handlers, no gtest teardown in the child
  }
}

Child::~Child() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

int Child::wait(Millis timeout) {
  if (pid_ <= 0) return -1;
  Deadline deadline = Deadline::after(timeout);
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    if (r < 0 && errno != EINTR) return -1;
    if (deadline.expired()) return -1;  // the destructor kills it
    std::this_thread::sleep_for(Millis(5));
  }
}

}  // namespace procgroup::detail::store_testing
