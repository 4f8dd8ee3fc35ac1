// The split probe plugin (split_probe_plugin.cc): the loopback plugin behind a table that
// records every group_create and group_split call the core makes, with the group the
// parent handle belongs to, and what each call returned. A test dlopens the same file as
// the core and reads the records through pgtest_split_probe_take.
//
//   auto take = reinterpret_cast<pgtest_split_probe_take_fn>(
//       dlsym(handle, PGTEST_SPLIT_PROBE_TAKE_SYMBOL));
//   pgtest_split_call_t calls[64];
//   size_t n = take(calls, 64);
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// A group as the probe knows it: from the config it was made with.
struct pgtest_probe_group_t {
  char id[96];  // "" for a handle the probe never handed out
  int32_t rank;
  int32_t size;
};

struct pgtest_split_call_t {
  char entry;                   // 'c': group_create, 's': group_split
  pgtest_probe_group_t parent;  // group_split: whose handle came as parent
  int32_t color;                // group_split's arguments
  int32_t key;
  int32_t has_config;         // 0: config was NULL
  pgtest_probe_group_t made;  // from the config (when given)
  int32_t local_rank;
  int32_t local_size;
  int32_t device_type;
  int64_t timeout_ms;
  char master_addr[64];
  int32_t has_store;
  int32_t status;    // what the call returned
  int32_t out_null;  // *out was NULL afterwards
};

// group_split with this key fails at once with PG_ERR_BACKEND "split probe: refused".
#define PGTEST_SPLIT_PROBE_REFUSE_KEY 424242

// Copies up to capacity records made since the last call into out, in call order, forgets
// them, and returns how many there were.
using pgtest_split_probe_take_fn = size_t (*)(pgtest_split_call_t* out, size_t capacity);
#define PGTEST_SPLIT_PROBE_TAKE_SYMBOL "pgtest_split_probe_take"

}  // extern "C"
