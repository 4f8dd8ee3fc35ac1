// libFuzzer target: the TCP store server's own parser. The input's first byte picks the
// server's frame limit (before or after authentication); the rest is one connection's byte
// stream, cut into frames by split_frame and each decoded by decode_request, as the server does.
// Checked for every decoded request: the fields its opcode needs are there and within the
// limits, and encoding it again gives back exactly the body it came from (the decoder
// accepts well-formed frames only). Keys and values then go through the helpers the server
// calls next (validate_key, printable_key, apply_add).
#include <cassert>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "store/store_protocol.h"

namespace {

using namespace procgroup::detail;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "store_protocol_fuzz: %s\n", what);
  std::abort();
}

// The frame body a correct client would send for the request.
Bytes encode(const Request& q) {
  FrameWriter w(q.op);
  if (q.op == Op::kAuth) w.raw(q.mac).raw(q.client_nonce);
  if (q.op == Op::kGet || q.op == Op::kWait) w.i64(q.timeout_ms);
  if (q.op == Op::kWait || q.op == Op::kCheck) w.u32(static_cast<uint32_t>(q.keys.size()));
  for (const std::string& k : q.keys) w.str(k);  // AUTH has none
  if (q.op == Op::kSet) w.str(q.value);
  if (q.op == Op::kAdd) w.i64(q.delta);
  if (q.op == Op::kCompareSet) w.str(q.value).str(q.desired);
  Bytes frame = w.finish();
  return Bytes(frame.begin() + kFrameHeaderBytes, frame.end());
}

void check(const Request& q, std::span<const uint8_t> body) {
  if (q.op == Op::kAuth) {
    if (q.mac.size() != kMacBytes || q.client_nonce.size() != kNonceBytes || !q.keys.empty())
      fail("auth fields");
  } else if (q.op == Op::kWait || q.op == Op::kCheck) {
    if (q.keys.size() > kMaxKeysPerRequest) fail("too many keys accepted");
  } else if (q.keys.size() != 1) {
    fail("one key expected");
  }
  for (const std::string& k : q.keys) {
    if (k.size() > kMaxKeyBytes) fail("over-long key accepted");
    (void)validate_key(k);
    // At most 100 bytes are shown, each as at most 4 characters ("\x01"), between quotes
    // and followed by "... (4096 bytes)".
    if (printable_key(k).size() > 2 + 4 * 100 + 32) fail("printable_key is not bounded");
  }
  if (q.value.size() > kMaxValueBytes || q.desired.size() > kMaxValueBytes) fail("value size");
  const Bytes again = encode(q);
  if (again.size() != body.size() || !std::equal(again.begin(), again.end(), body.begin())) {
    fail("decode_request accepted a body that does not re-encode to itself");
  }
  if (q.op == Op::kSet) {
    // The counter parser against std::from_chars: a decimal int64 or an error.
    const Bytes current(q.value.begin(), q.value.end());
    Result<int64_t> sum = apply_add(q.keys[0], &current, 1);
    int64_t v = 0;
    const char* first = reinterpret_cast<const char*>(current.data());
    auto [end, ec] = std::from_chars(first, first + current.size(), v);
    const bool number = ec == std::errc() && end == first + current.size();
    if (sum.ok() && (!number || v == INT64_MAX || sum.value() != v + 1)) fail("apply_add");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The largest body the server takes (TcpStoreServer::Loop::input_limit less the header).
  const size_t max_body = (data[0] & 1) ? kMaxUnauthenticatedFrameBytes : kMaxFrameBytes;
  std::span<const uint8_t> in(data + 1, size - 1);
  while (true) {
    FrameSplit next = split_frame(in, max_body);
    if (next.kind != FrameSplit::kFrame) {
      if (next.kind == FrameSplit::kBadLength && next.length >= 1 && next.length <= max_body) {
        fail("a valid length was refused");
      }
      break;
    }
    if (next.body.size() != next.length || next.body.empty()) fail("frame body size");
    Result<Request> q = decode_request(next.body);
    if (q.ok()) {
      check(q.value(), next.body);
    } else if (q.status().code() != PG_ERR_STORE && q.status().code() != PG_ERR_AUTH) {
      fail("a framing error must be PG_ERR_STORE or PG_ERR_AUTH");
    }
    in = in.subspan(kFrameHeaderBytes + next.body.size());
  }
  return 0;
}
