// An out struct for pg_backend_negotiate of any size, for tests that check a plugin writes
// only what the core's struct_size covers: the declared bytes zeroed (as the core does),
// struct_size set, everything else a pattern.
//
//   OutBuffer out(sizeof(pg_backend_negotiate_out_t) + 64, sizeof(pg_backend_negotiate_out_t) +
//   64); negotiate(&in, out.get());
//   EXPECT_TRUE(out.untouched_from(sizeof(pg_backend_negotiate_out_t)));
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "procgroup/procgroup_backend.h"

struct OutBuffer {
  OutBuffer(size_t size, uint32_t declared) : bytes(size, 0xAB) {
    std::memset(bytes.data(), 0, std::min<size_t>(declared, sizeof(pg_backend_negotiate_out_t)));
    std::memcpy(bytes.data(), &declared, sizeof declared);
  }
  pg_backend_negotiate_out_t* get() {
    return reinterpret_cast<pg_backend_negotiate_out_t*>(bytes.data());
  }
  bool untouched_from(size_t offset) const {
    for (size_t i = offset; i < bytes.size(); ++i)
      if (bytes[i] != 0xAB) return false;
    return true;
  }
  std::vector<unsigned char> bytes;
};
