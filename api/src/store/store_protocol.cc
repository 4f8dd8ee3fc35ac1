#include "store/store_protocol.h"

#include <algorithm>
#include <charconv>
#include <limits>

namespace procgroup::detail {

const char* op_text(Op op) {
  switch (op) {
    case Op::kSet: return "set";
    case Op::kGet: return "get";
    case Op::kAdd: return "add";
    case Op::kCompareSet: return "compare_set";
    case Op::kRemove: return "remove";
    case Op::kWait: return "wait";
    case Op::kCheck: return "check";
    case Op::kAuth: return "auth";
    case Op::kHello: return "hello";
    case Op::kOk: return "ok";
    case Op::kValue: return "value";
    case Op::kInt: return "int";
    case Op::kBool: return "bool";
    case Op::kError: return "error";
  }
  return "unknown";
}

bool is_request(uint8_t opcode) {
  return opcode >= static_cast<uint8_t>(Op::kSet) && opcode <= static_cast<uint8_t>(Op::kAuth);
}

uint64_t load_be64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

FrameWriter::FrameWriter(Op op) : buf_(kFrameHeaderBytes, 0) {
  buf_.push_back(static_cast<uint8_t>(op));
}

FrameWriter& FrameWriter::u8(uint8_t v) {
  buf_.push_back(v);
  return *this;
}

FrameWriter& FrameWriter::u32(uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) buf_.push_back(static_cast<uint8_t>(v >> shift));
  return *this;
}

FrameWriter& FrameWriter::i64(int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int shift = 56; shift >= 0; shift -= 8) buf_.push_back(static_cast<uint8_t>(u >> shift));
  return *this;
}

FrameWriter& FrameWriter::raw(std::span<const uint8_t> data) {
  buf_.insert(buf_.end(), data.begin(), data.end());
  return *this;
}

FrameWriter& FrameWriter::str(std::span<const uint8_t> data) {
  u32(static_cast<uint32_t>(data.size()));
  return raw(data);
}

FrameWriter& FrameWriter::str(std::string_view data) { return str(as_bytes(data)); }

Bytes FrameWriter::finish() {
  uint64_t length = buf_.size() - kFrameHeaderBytes;
  for (int i = 0; i < 8; ++i) buf_[i] = static_cast<uint8_t>(length >> (56 - 8 * i));
  return std::move(buf_);
}

bool FrameReader::take(size_t n, std::string_view what) {
  if (failed()) return false;
  if (data_.size() - pos_ < n) {
    error_ = fmt::format("malformed frame: {} needs {} bytes but only {} remain", what, n,
                         data_.size() - pos_);
    return false;
  }
  return true;
}

uint8_t FrameReader::u8() {
  if (!take(1, "u8")) return 0;
  return data_[pos_++];
}

uint32_t FrameReader::u32() {
  if (!take(4, "u32")) return 0;
  uint32_t v = load_be32(data_.data() + pos_);
  pos_ += 4;
  return v;
}

int64_t FrameReader::i64() {
  if (!take(8, "i64")) return 0;
  uint64_t v = load_be64(data_.data() + pos_);
  pos_ += 8;
  return static_cast<int64_t>(v);
}

std::span<const uint8_t> FrameReader::raw(size_t n, std::string_view what) {
  if (!take(n, what)) return {};
  auto out = data_.subspan(pos_, n);
  pos_ += n;
  return out;
}

std::span<const uint8_t> FrameReader::str(std::string_view what, size_t max) {
  uint32_t n = u32();
  if (failed()) return {};
  if (n > max) {
    error_ = fmt::format("{} of {} bytes exceeds the limit of {} bytes", what, n, max);
    return {};
  }
  return raw(n, what);
}

bool FrameReader::finish() {
  if (failed()) return false;
  if (pos_ != data_.size()) {
    error_ = fmt::format("malformed frame: {} unexpected trailing bytes", data_.size() - pos_);
    return false;
  }
  return true;
}

Status validate_key(std::string_view key) {
  if (key.empty()) return make_error(PG_ERR_INVALID_ARGUMENT, "store key is empty");
  if (key.size() > kMaxKeyBytes) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "store key {} is {} bytes; the limit is {}",
                      printable_key(key), key.size(), kMaxKeyBytes);
  }
  return ok_status();
}

Status validate_value(std::string_view key, size_t size) {
  if (size > kMaxValueBytes) {
    return make_error(PG_ERR_INVALID_ARGUMENT,
                      "value for store key {} is {} bytes; the limit is {} bytes",
                      printable_key(key), size, kMaxValueBytes);
  }
  return ok_status();
}

std::string printable_key(std::string_view key) {
  constexpr size_t kShown = 100;
  std::string out = "'";
  for (size_t i = 0; i < key.size() && i < kShown; ++i) {
    auto c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  out += "'";
  if (key.size() > kShown) out += fmt::format("... ({} bytes)", key.size());
  return out;
}

std::string printable_keys(std::span<const std::string> keys) {
  constexpr size_t kShown = 4;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) {
    if (i > 0) out += ", ";
    out += printable_key(keys[i]);
  }
  if (keys.size() > kShown) out += fmt::format(" and {} more", keys.size() - kShown);
  return out;
}

Result<int64_t> apply_add(std::string_view key, const Bytes* current, int64_t delta) {
  int64_t value = 0;
  if (current != nullptr) {
    auto text = as_chars(*current);
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end) {
      return make_error(PG_ERR_INVALID_ARGUMENT,
                        "add on store key {}: its value is not a decimal integer",
                        printable_key(key));
    }
  }
  if ((delta > 0 && value > std::numeric_limits<int64_t>::max() - delta) ||
      (delta < 0 && value < std::numeric_limits<int64_t>::min() - delta)) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "add on store key {}: {} + {} overflows int64",
                      printable_key(key), value, delta);
  }
  return value + delta;
}

Bytes counter_bytes(int64_t value) {
  std::string text = fmt::format("{}", value);
  return Bytes(text.begin(), text.end());
}

bool compare_matches(const Bytes* current, std::span<const uint8_t> expected) {
  if (current == nullptr) return expected.empty();
  return current->size() == expected.size() &&
         std::equal(current->begin(), current->end(), expected.begin());
}

Result<Request> decode_request(std::span<const uint8_t> body) {
  FrameReader r(body);
  const uint8_t opcode = r.u8();
  if (!is_request(opcode)) {
    return make_error(PG_ERR_STORE, "unknown command 0x{:02x}", body.empty() ? 0 : body[0]);
  }
  Request q;
  q.op = static_cast<Op>(opcode);
  if (q.op == Op::kAuth) {
    q.mac = r.raw(kMacBytes, "auth answer");
    q.client_nonce = r.raw(kNonceBytes, "client nonce");
    if (!r.finish()) return Status(PG_ERR_AUTH, r.error());
    return q;
  }
  if (q.op == Op::kGet || q.op == Op::kWait) q.timeout_ms = r.i64();
  if (q.op == Op::kWait || q.op == Op::kCheck) {
    const uint32_t count = r.u32();
    if (count > kMaxKeysPerRequest) {
      return make_error(PG_ERR_STORE, "{} keys in one {} exceeds the limit of {}", count,
                        op_text(q.op), kMaxKeysPerRequest);
    }
    for (uint32_t i = 0; i < count && !r.failed(); ++i) {
      q.keys.emplace_back(as_chars(r.str("key", kMaxKeyBytes)));
    }
  } else {
    q.keys.emplace_back(as_chars(r.str("key", kMaxKeyBytes)));
  }
  switch (q.op) {
    case Op::kSet: q.value = r.str("value", kMaxValueBytes); break;
    case Op::kAdd: q.delta = r.i64(); break;
    case Op::kCompareSet:
      q.value = r.str("expected value", kMaxValueBytes);
      q.desired = r.str("desired value", kMaxValueBytes);
      break;
    default: break;
  }
  if (!r.finish()) {
    return make_error(PG_ERR_STORE, "malformed {} request: {}", op_text(q.op), r.error());
  }
  return q;
}

FrameSplit split_frame(std::span<const uint8_t> input, size_t max_body) {
  FrameSplit split;
  if (input.size() < kFrameHeaderBytes) return split;
  split.length = load_be64(input.data());
  if (split.length == 0 || split.length > max_body) {
    split.kind = FrameSplit::kBadLength;
    return split;
  }
  if (input.size() - kFrameHeaderBytes < split.length) return split;
  split.kind = FrameSplit::kFrame;
  split.body = input.subspan(kFrameHeaderBytes, static_cast<size_t>(split.length));
  return split;
}

}  // namespace procgroup::detail
