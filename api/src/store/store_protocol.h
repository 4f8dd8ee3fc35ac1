// The TCP store's wire protocol: frame layout, opcodes, limits, and a small encoder and
// decoder for frames. The server (tcp_store_server.h), the client (tcp_store_client.h) and
// the hardening tests share it.
//
//   Bytes frame = FrameWriter(Op::kGet).i64(1000).str("addr/1").finish();
//   FrameReader r(body);                       // body = a frame without its header
//   Op op = r.op(); int64_t t = r.i64(); auto key = r.str("key", kMaxKeyBytes);
//   if (!r.finish()) return r.error();
//
// Frame format (every integer big-endian):
//
//   frame   := length:u64  body[length]          length counts body bytes only, 1..limit
//   body    := opcode:u8  fields...
//   str     := n:u32  bytes[n]
//
// After accepting a connection the server sends HELLO; a client reads it before anything
// else. With a token, the client must answer with AUTH before any request, and the server
// proves in turn that it knows the token too (so a program squatting MASTER_PORT cannot
// pose as the store to ranks that hold a token):
//
//   HELLO    magic:u32 ("PGST")  version:u8  auth_required:u8  nonce[32]
//   AUTH     mac[32] = HMAC-SHA256(token, nonce || kAuthContext)  client_nonce[32]
//   -> VALUE proof:str, proof = HMAC-SHA256(token, client_nonce || nonce || kProofContext)
//
// Requests (client -> server) and their successful replies:
//
//   SET          key:str value:str                       -> OK
//   GET          timeout_ms:i64 key:str                  -> VALUE value:str (held until set)
//   ADD          key:str delta:i64                       -> INT value:i64
//   COMPARE_SET  key:str expected:str desired:str        -> VALUE value:str
//   REMOVE       key:str                                 -> BOOL existed:u8
//   WAIT         timeout_ms:i64 count:u32 key:str*count  -> OK (held until all are set)
//   CHECK        count:u32 key:str*count                 -> BOOL all_exist:u8
//   AUTH         mac[32] client_nonce[32]                -> VALUE proof[32]
//
// Any request may instead get ERROR code:i32 (a pg_status_t) message:str. A timed-out GET
// or WAIT gets ERROR PG_ERR_TIMEOUT. Replies come in request order; the server does not
// read the next request of a connection until the previous one is answered. A framing
// error (bad length, unknown opcode, trailing bytes, truncated frame) gets ERROR and the
// connection is closed; a request error (key too long, not a number) gets ERROR only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace procgroup::detail {

using Bytes = std::vector<uint8_t>;

// ---- Limits ---------------------------------------------------------------------------

inline constexpr uint32_t kProtocolMagic = 0x50475354;  // "PGST"
inline constexpr uint8_t kProtocolVersion = 2;  // 2: the server proves the token too
inline constexpr size_t kFrameHeaderBytes = 8;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;  // SHA-256
inline constexpr std::string_view kAuthContext = "procgroup-store-auth-v1";
inline constexpr std::string_view kProofContext = "procgroup-store-proof-v2";

// A key; also the limit of every store (memory, file, prefix) so that code is portable.
inline constexpr size_t kMaxKeyBytes = 4096;
// A value (64 MiB): a rendezvous exchanges addresses, not tensors.
inline constexpr size_t kMaxValueBytes = size_t{64} << 20;
// Keys in one WAIT or CHECK request.
inline constexpr size_t kMaxKeysPerRequest = 1024;
// A frame body: COMPARE_SET carries two values; 64 KiB covers keys and fields.
inline constexpr size_t kMaxFrameBytes = 2 * kMaxValueBytes + (size_t{64} << 10);
// A frame before authentication: only AUTH (1 + 32 + 32 bytes) is allowed there.
inline constexpr size_t kMaxUnauthenticatedFrameBytes = 1 + kMacBytes + kNonceBytes;
// Keys the server holds at once.
inline constexpr size_t kMaxStoredKeys = size_t{1} << 20;
// Connections the server serves at once. At the limit a new one evicts the oldest that has
// not yet sent a request (or authenticated); if every one has, it is told so and closed.
inline constexpr size_t kMaxConnections = 4096;
// Bytes the server holds in keys and values, plus frames it is receiving
// (PROCGROUP_STORE_MAX_BYTES overrides it): beyond, a SET is refused as "the store is full".
inline constexpr size_t kDefaultMaxStoreBytes = size_t{256} << 20;
// Per connection, the server buffers at most one frame of input (header + kMaxFrameBytes)
// and stops reading requests while more than this much of its replies are unsent.
inline constexpr size_t kMaxBufferedReplyBytes = 2 * kMaxValueBytes;
// A new connection must send AUTH (with a token) or its first request (without) within this
// time, or it is closed: a connection that sends nothing holds a slot for nobody.
inline constexpr Millis kAuthTimeout{5000};
// A connection that leaves a frame incomplete without sending a byte for this long is
// closed (a stalled or slowloris client); other connections are never held up by it.
inline constexpr Millis kStalledFrameTimeout{60000};
// After a fatal error the server flushes the ERROR reply and discards input this long,
// so the client reads the reason instead of a connection reset.
inline constexpr Millis kLingerTimeout{2000};

enum class Op : uint8_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCompareSet = 4,
  kRemove = 5,
  kWait = 6,
  kCheck = 7,
  kAuth = 8,
  // Server to client.
  kHello = 0x40,
  kOk = 0x41,
  kValue = 0x42,
  kInt = 0x43,
  kBool = 0x44,
  kError = 0x45,
};

const char* op_text(Op op);
bool is_request(uint8_t opcode);

// ---- Encoding -------------------------------------------------------------------------

// Builds one frame, header included.
class FrameWriter {
 public:
  explicit FrameWriter(Op op);
  FrameWriter& u8(uint8_t v);
  FrameWriter& u32(uint32_t v);
  FrameWriter& i64(int64_t v);
  FrameWriter& raw(std::span<const uint8_t> data);
  FrameWriter& str(std::span<const uint8_t> data);
  FrameWriter& str(std::string_view data);
  // Patches the length into the header.
  Bytes finish();

 private:
  Bytes buf_;
};

// Reads the fields of one frame body. The first failure sticks: later reads return empty
// values, and finish() reports it (or trailing bytes) as PG_ERR_STORE.
class FrameReader {
 public:
  explicit FrameReader(std::span<const uint8_t> body) : data_(body) {}
  uint8_t u8();
  uint32_t u32();
  int64_t i64();
  std::span<const uint8_t> raw(size_t n, std::string_view what);
  // A length-prefixed string of at most max bytes; a longer one fails naming what.
  std::span<const uint8_t> str(std::string_view what, size_t max);
  bool failed() const { return !error_.empty(); }
  // True when every byte was read without error.
  bool finish();
  const std::string& error() const { return error_; }

 private:
  bool take(size_t n, std::string_view what);
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  std::string error_;
};

// One request as the server reads it from a frame body (opcode first). Spans point into
// the body. Which fields are set depends on op (see the table at the top of this file).
struct Request {
  Op op = Op::kSet;
  int64_t timeout_ms = 0;            // GET, WAIT
  int64_t delta = 0;                 // ADD
  std::vector<std::string> keys;     // one, or count for WAIT/CHECK, none for AUTH
  std::span<const uint8_t> value;    // SET; the expected value of COMPARE_SET
  std::span<const uint8_t> desired;  // COMPARE_SET
  std::span<const uint8_t> mac;      // AUTH
  std::span<const uint8_t> client_nonce;  // AUTH: what the server's proof must cover
};

// Decodes a request body. A framing error (unknown opcode, truncated or over-long field,
// more than kMaxKeysPerRequest keys, trailing bytes) is PG_ERR_STORE (PG_ERR_AUTH for a
// malformed AUTH) and closes the connection. Whether each key is valid (validate_key) is
// a request error checked separately. Pure, so the fuzzer drives the server's own parser.
Result<Request> decode_request(std::span<const uint8_t> body);

// Where the next frame of a connection's input ends: kIncomplete until its header and body
// are all there, kBadLength for a length outside 1..max_body (the connection is closed).
struct FrameSplit {
  enum Kind { kFrame, kIncomplete, kBadLength } kind = kIncomplete;
  uint64_t length = 0;            // the header's length field
  std::span<const uint8_t> body;  // kFrame: the body
};
FrameSplit split_frame(std::span<const uint8_t> input, size_t max_body);

uint64_t load_be64(const uint8_t* p);
uint32_t load_be32(const uint8_t* p);

inline std::string_view as_chars(std::span<const uint8_t> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}
inline std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// ---- Semantics shared by every store ---------------------------------------------------

// PG_ERR_INVALID_ARGUMENT for an empty or too long key, naming it.
Status validate_key(std::string_view key);
Status validate_value(std::string_view key, size_t size);
// A key as it appears in messages: printable, escaped, at most ~100 characters.
std::string printable_key(std::string_view key);
// "'a', 'b'" for up to a few keys, then "and N more".
std::string printable_keys(std::span<const std::string> keys);
// The counter behind add(): absent is 0, else the value must be a decimal int64. Returns the
// new value or PG_ERR_INVALID_ARGUMENT (not a number, overflow).
Result<int64_t> apply_add(std::string_view key, const Bytes* current, int64_t delta);
Bytes counter_bytes(int64_t value);
// compare_set's test: an empty expected matches an absent key.
bool compare_matches(const Bytes* current, std::span<const uint8_t> expected);

}  // namespace procgroup::detail
