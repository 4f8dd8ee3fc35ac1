#include "store_token.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace procgroup::pgrun {
namespace {

constexpr std::size_t kTokenBytes = 32;  // 256 bits, as the HMAC-SHA256 key

// Fills buf from the kernel's CSPRNG; false (errno set) if it cannot.
bool random_bytes(uint8_t* buf, std::size_t n) {
  while (n > 0) {
    const ssize_t got = ::getrandom(buf, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    buf += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace

TokenDecision decide_store_token(const Options& options) {
  TokenDecision d;
  if (options.store_token == StoreTokenMode::kOff) return d;
  const char* existing = std::getenv("PROCGROUP_STORE_TOKEN");
  if (existing != nullptr && *existing != '\0') return d;  // passed through as it is
  if (options.nnodes > 1) {
    d.note =
        "the rendezvous store is not authenticated: for a multi-node job set "
        "PROCGROUP_STORE_TOKEN to the same secret on every node (or pass --store-token off to "
        "silence this)";
    return d;
  }
  uint8_t raw[kTokenBytes];
  if (!random_bytes(raw, sizeof(raw))) {
    d.error = std::string("cannot generate a store token: ") + std::strerror(errno);
    return d;
  }
  static const char kHex[] = "0123456789abcdef";
  d.env_entry = "PROCGROUP_STORE_TOKEN=";
  for (uint8_t b : raw) {
    d.env_entry += kHex[b >> 4];
    d.env_entry += kHex[b & 15];
  }
  return d;
}

}  // namespace procgroup::pgrun
