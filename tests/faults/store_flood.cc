#include "store_flood.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <random>

namespace procgroup::testing {
namespace {

void put_be64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

void send_all(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w <= 0) return;
    data += w;
    n -= static_cast<size_t>(w);
  }
}

// Reads until the store sends an ERROR frame (true), closes, or timeout_ms passes. Frames:
// length:u64 big-endian, then the body, opcode first (0x45 is ERROR).
bool drain(int fd, int timeout_ms) {
  std::vector<uint8_t> got;
  uint8_t buf[4096];
  size_t at = 0;  // start of the next unparsed frame
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    got.insert(got.end(), buf, buf + n);
    while (at + 9 <= got.size()) {
      uint64_t length = 0;
      for (int i = 0; i < 8; ++i) length = (length << 8) | got[at + i];
      if (got[at + 8] == 0x45) return true;
      if (length == 0 || got.size() - at - 8 < length) break;
      at += 8 + static_cast<size_t>(length);
    }
  }
  return false;
}

}  // namespace

StoreFlood::StoreFlood(std::string host, int port, int threads)
    : host_(std::move(host)), port_(port) {
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t] { attack(t); });
}

StoreFlood::~StoreFlood() { stop(); }

StoreFlood::Counts StoreFlood::stop() {
  stop_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  return Counts{connections_.load(), rejected_.load()};
}

int StoreFlood::open_connection() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  ::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return -1;
  }
  ++connections_;
  return fd;
}

// Each thread cycles through every kind of attack, starting at its own.
void StoreFlood::attack(int first) {
  std::mt19937 rng(static_cast<uint32_t>(first * 7919 + port_));
  for (int round = first; !stop_; ++round) {
    const int fd = open_connection();
    if (fd < 0) continue;
    uint8_t frame[64] = {};
    switch (round % 6) {
      case 0: {  // garbage
        for (uint8_t& b : frame) b = static_cast<uint8_t>(rng());
        send_all(fd, frame, sizeof(frame));
        break;
      }
      case 1: {  // truncated: a header promising 100 bytes, 10 sent, then close
        put_be64(frame, 100);
        frame[8] = 1;
        send_all(fd, frame, 18);
        ::shutdown(fd, SHUT_WR);
        break;
      }
      case 2: {  // huge length
        put_be64(frame, uint64_t{1} << 62);
        send_all(fd, frame, 16);
        break;
      }
      case 3: {  // slowloris: one byte of a frame every 100 ms for a while
        put_be64(frame, 40);
        for (int i = 0; i < 12 && !stop_; ++i) {
          send_all(fd, frame + i, 1);
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        break;
      }
      case 4: {  // wrong token: AUTH with a made-up answer
        put_be64(frame, 33);
        frame[8] = 8;  // AUTH
        for (int i = 9; i < 41; ++i) frame[i] = static_cast<uint8_t>(rng());
        send_all(fd, frame, 41);
        break;
      }
      default: {  // a burst of idle connections, held briefly
        std::vector<int> idle;
        for (int i = 0; i < 50 && !stop_; ++i) {
          const int extra = open_connection();
          if (extra >= 0) idle.push_back(extra);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        for (int extra : idle) ::close(extra);
        break;
      }
    }
    if (drain(fd, 300)) ++rejected_;
    ::close(fd);
  }
}

}  // namespace procgroup::testing
