// A client of torch's c10d TCPStore server, speaking torch's own wire protocol. Under
// torchrun's default launch the elastic agent already hosts a TCPStore on MASTER_PORT and
// says so with TORCHELASTIC_USE_AGENT_STORE=True; procgroup then joins that store instead of
// starting its own (open_store() with a c10d:// URL). Thread-safe like TcpStoreClient: each
// call borrows a pooled connection, so a get() waiting on one thread never blocks a set() on
// another. Every blocking call honours its deadline; errors name the store and say why
// (refused, timed out, closed, unknown protocol).
//
// Our keys live under key_prefix inside torch's key space, and the wire key starts with
// torch's own "/" (TCPStore's keyPrefix_), so torch code sees them through
// PrefixStore("procgroup/attempt_0", TCPStore(...)) and never collides with its own keys.
//
//   PG_ASSIGN_OR_RETURN(auto store, C10dStoreClient::connect({.host = "127.0.0.1",
//                                                             .port = 29500,
//                                                             .key_prefix = "procgroup/"}));
//   PG_RETURN_IF_ERROR(store->set("addr/0", bytes));
//   PG_ASSIGN_OR_RETURN(Bytes peer, store->get("addr/1", Millis(30000)));
//
// The wire format, as torch's servers read it (integers in host byte order; strings and
// byte vectors are length:u64 then the bytes):
//
//   SET k v            -> nothing          CHECK n:u64 k*n -> u8: 0 READY, 1 NOT_READY
//   COMPARE_SET k e d  -> value after      WAIT n:u64 k*n  -> u8 0 once every key exists
//   GET k              -> value            DELETE_KEY k    -> i64 keys deleted
//   ADD k delta:i64    -> i64 new value
//
// Two numberings of the query codes exist. "Legacy" servers (torch 1.13 to 2.2) number
// SET=0 COMPARE_SET=1 GET=2 ADD=3 CHECK=4 WAIT=5 GETNUMKEYS=6 WATCH_KEY=7 DELETE_KEY=8.
// "Validated" servers (torch 2.3 and later, the classic and the libuv server alike) put
// VALIDATE=0 first and drop WATCH_KEY, so SET=1 ... WAIT=6 GETNUMKEYS=7 DELETE_KEY=8, and
// they expect VALIDATE magic:u32 (0x3C85F7CE) as the first message of every connection.
// connect() finds out which one it talks to (detect_protocol() below says how, and why the
// probe is safe on both).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/socket_util.h"
#include "store/store.h"

namespace procgroup::detail {

// A value torch's libuv server accepts (its MAX_PAYLOAD_LEN); we hold every server to it.
inline constexpr size_t kMaxC10dValueBytes = size_t{8} << 20;

struct C10dStoreClientOptions {
  std::string host{};
  int port = 0;
  std::string key_prefix = "procgroup/";       // where our keys live in torch's key space
  std::string name = "torch's c10d TCPStore";  // how messages name the store
  Millis timeout{300000};                      // connecting (retried until then) and each request
};

class C10dStoreClient final : public Store {
 public:
  enum class Protocol { kLegacy, kValidated };

  // Connects, finds out the protocol and checks that the server answers it, retrying a
  // refused connection with backoff until options.timeout. A server that speaks neither
  // protocol fails at once with PG_ERR_STORE.
  static Result<std::unique_ptr<C10dStoreClient>> connect(C10dStoreClientOptions options);

  Status set(std::string_view key, std::span<const uint8_t> value) override;
  Result<Bytes> get(std::string_view key, Millis timeout) override;
  Result<int64_t> add(std::string_view key, int64_t delta) override;
  Result<Bytes> compare_set(std::string_view key, std::span<const uint8_t> expected,
                            std::span<const uint8_t> desired) override;
  Result<bool> remove(std::string_view key) override;
  Status wait(std::span<const std::string> keys, Millis timeout) override;
  Result<bool> check(std::span<const std::string> keys) override;

  Protocol protocol() const { return protocol_; }
  // "torch's c10d TCPStore at 127.0.0.1:29500", as used in messages.
  const std::string& description() const { return description_; }

 private:
  enum class Query : uint8_t;
  enum class ReplyKind { kByte, kInt, kValue };
  struct Reply {
    uint8_t byte = 0;
    int64_t integer = 0;
    Bytes value;
  };

  explicit C10dStoreClient(C10dStoreClientOptions options);
  // Which numbering the server reads. The first connection sends one DELETE_KEY for a
  // key nobody sets (code 8 in both numberings), then shuts down its sending side:
  //  - a legacy server deletes nothing, answers i64 0, then sees our EOF and closes;
  //  - a validated server wants VALIDATE first. The classic server closes the connection
  //    on any other first query ("Miscellaneous client without VALIDATE query"); the libuv
  //    server drops it unanswered and closes on our EOF. Either way: closed or reset, and
  //    no bytes.
  // Why this is safe on both, when VALIDATE first would not be: a legacy server reads
  // VALIDATE's code 0 as SET and the magic as the key's length (about 1 GB), so it would
  // allocate that much and block its single thread for bytes that never come, hanging the
  // store for every rank. DELETE_KEY of a short key is one complete, harmless request in
  // both numberings (a validated server never acts on it, a legacy one finds nothing to
  // delete), and the half-close ends the libuv server's wait for more. Nothing else is
  // sent on the probe's connection.
  Result<Protocol> detect_protocol(Deadline deadline);
  // One TCP connection, retried with backoff while refused, until deadline.
  Result<UniqueFd> connect_retrying(Deadline deadline);
  // A new pooled connection: connected, validated where needed, and a CHECK answered.
  Result<UniqueFd> open_connection(Deadline deadline);
  // Sends request on a pooled connection and reads one reply of the given kind. The
  // connection returns to the pool only after a complete reply, so a late reply can never
  // answer the next request.
  Result<Reply> call(std::string_view what, const Bytes& request, ReplyKind kind,
                     Deadline deadline);
  uint8_t code(Query query) const;
  Bytes request(Query query) const;
  // CHECK or WAIT: a count, then each key as sent.
  Bytes key_list(Query query, std::span<const std::string> keys) const;
  std::string wire_key(std::string_view key) const;
  Status fail(std::string_view what, const Status& cause) const;

  C10dStoreClientOptions options_;
  std::string description_;
  Protocol protocol_ = Protocol::kLegacy;  // set once by connect()
  static constexpr size_t kMaxIdleConnections = 4;
  IdleConnections idle_{kMaxIdleConnections};
};

}  // namespace procgroup::detail
