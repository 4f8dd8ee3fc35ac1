// The rendezvous key-value store: what ranks use to find each other. Implementations:
// a TCP store hosted by rank 0 (tcp_store_server.h, tcp_store_client.h), a file store for
// one host (file_store.h), an in-memory store for single-rank groups, and a prefix view
// scoping keys to one group. All are thread-safe; blocking calls honour their timeout.
//
//   PG_ASSIGN_OR_RETURN(auto store, open_store({.url = "tcp://127.0.0.1:29500", .rank = r,
//                                                .world_size = n, .timeout = Millis(30000)}));
//   PG_RETURN_IF_ERROR(store->set("addr/0", bytes));
//   PG_ASSIGN_OR_RETURN(auto peer, store->get("addr/1", Millis(30000)));
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace procgroup::detail {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;

  virtual Status set(std::string_view key, std::span<const uint8_t> value) = 0;
  // Waits until key exists; PG_ERR_TIMEOUT naming the key if it does not appear in time.
  virtual Result<Bytes> get(std::string_view key, Millis timeout) = 0;
  // Adds delta to the decimal integer stored at key (absent: 0); returns the new value.
  virtual Result<int64_t> add(std::string_view key, int64_t delta) = 0;
  // Sets key to desired if its current value equals expected (an empty expected matches
  // an absent key). Returns the value after the operation.
  virtual Result<Bytes> compare_set(std::string_view key, std::span<const uint8_t> expected,
                                    std::span<const uint8_t> desired) = 0;
  // Returns whether the key existed.
  virtual Result<bool> remove(std::string_view key) = 0;
  // Waits until every key exists.
  virtual Status wait(std::span<const std::string> keys, Millis timeout) = 0;
  // Whether every key exists, without waiting.
  virtual Result<bool> check(std::span<const std::string> keys) = 0;
};

struct StoreConfig {
  std::string url;       // "tcp://host:port" or "file:///abs/path"; "memory:" for size 1
  int rank = 0;
  int world_size = 1;
  std::string token;     // shared secret; empty: no authentication
  Millis timeout{300000};
};

// Opens the store a group rendezvous through. With tcp://, rank 0 first starts the
// server, bound to host only, and keeps it alive for as long as the returned Store lives;
// other ranks connect, retrying until timeout. A port in use, an unreachable host, a bad
// token or a malformed URL give a Status naming what is wrong.
Result<std::shared_ptr<Store>> open_store(const StoreConfig& config);

// A view of base where every key is prefixed with prefix (e.g. "pg/world/").
std::shared_ptr<Store> make_prefix_store(std::shared_ptr<Store> base, std::string prefix);

// A private in-process store (for single-rank groups and tests).
std::shared_ptr<Store> make_memory_store();

}  // namespace procgroup::detail
