#include "store/tcp_store_client.h"

#include <poll.h>

#include <algorithm>
#include <thread>

#include "common/log.h"
#include "store/store_auth.h"

namespace procgroup::detail {
namespace {

constexpr Millis kFirstBackoff{10};
constexpr Millis kMaxBackoff{1000};

// Reads one frame; returns its body (opcode first).
Result<Bytes> read_frame(int fd, Deadline deadline) {
  uint8_t header[kFrameHeaderBytes];
  PG_RETURN_IF_ERROR(recv_exact(fd, header, deadline));
  uint64_t length = load_be64(header);
  if (length == 0 || length > kMaxFrameBytes) {
    return make_error(PG_ERR_STORE, "malformed reply: frame length {}", length);
  }
  Bytes body(length);
  PG_RETURN_IF_ERROR(recv_exact(fd, body, deadline));
  return body;
}

// ERROR code:i32 message:str as a Status (unknown codes become PG_ERR_STORE).
Status error_from(std::span<const uint8_t> fields) {
  FrameReader r(fields);
  auto code = static_cast<pg_status_t>(r.u32());
  std::string message(as_chars(r.str("message", kMaxFrameBytes)));
  if (!r.finish()) return make_error(PG_ERR_STORE, "malformed error reply: {}", r.error());
  if (code <= PG_OK || code > PG_ERR_INTERNAL) code = PG_ERR_STORE;
  return Status(code, message);
}

// Far enough for any rendezvous, near enough that deadline arithmetic cannot overflow.
Millis wait_limit(Millis timeout) {
  return std::clamp(timeout, Millis(0), Millis(int64_t{30} * 24 * 3600 * 1000));
}
int64_t to_ms(Millis timeout) { return wait_limit(timeout).count(); }

}  // namespace

TcpStoreClient::TcpStoreClient(TcpStoreClientOptions options)
    : options_(std::move(options)), endpoint_(host_port(options_.host, options_.port)) {}

Result<std::unique_ptr<TcpStoreClient>> TcpStoreClient::connect(TcpStoreClientOptions options) {
  if (options.port <= 0 || options.port > 65535) {
    return make_error(PG_ERR_CONFIG, "store port {} is out of range 1..65535", options.port);
  }
  std::unique_ptr<TcpStoreClient> client(new TcpStoreClient(std::move(options)));
  PG_ASSIGN_OR_RETURN(UniqueFd fd,
                      client->open_connection(Deadline::after(client->options_.timeout)));
  client->established_ = true;
  // Kept for the first request only once authenticated: the server closes a connection
  // that sends nothing for a while (kAuthTimeout), and the first request may come later.
  if (!client->options_.token.empty()) client->idle_.give_back(std::move(fd));
  return client;
}

Status TcpStoreClient::fail(std::string_view what, const Status& cause) const {
  return Status(cause.code(),
                fmt::format("{} on store at {}: {}", what, endpoint_, cause.message()));
}

Result<UniqueFd> TcpStoreClient::open_connection(Deadline deadline) {
  Millis backoff = kFirstBackoff;
  Status last;
  for (;;) {
    bool fatal = false;
    auto fd = try_connect(deadline, &fatal);
    if (fd.ok()) return fd;
    if (fatal) return fd.status();
    // A late timeout says less than an earlier refusal ("too many connections").
    if (last.ok() || fd.status().code() != PG_ERR_TIMEOUT) last = fd.status();
    if (deadline.expired()) break;
    std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  return make_error(PG_ERR_STORE,
                    "cannot connect to the store at {} within {} ms: {} (is rank 0 running, "
                    "and do MASTER_ADDR and MASTER_PORT point at it?)",
                    endpoint_, options_.timeout.count(), last.message());
}

Result<UniqueFd> TcpStoreClient::try_connect(Deadline deadline, bool* fatal) {
  PG_ASSIGN_OR_RETURN(AddrInfoList addrs, resolve_tcp(options_.host, options_.port, false));
  Status last = make_error(PG_ERR_STORE, "'{}' has no address", options_.host);
  bool all_refused = addrs.head() != nullptr;
  for (const addrinfo* ai = addrs.head(); ai != nullptr; ai = ai->ai_next) {
    bool refused = false;
    auto fd = connect_once(ai->ai_addr, ai->ai_addrlen, deadline, &refused);
    if (!fd.ok()) {
      all_refused = all_refused && refused;
      last = fd.status();
      continue;
    }
    all_refused = false;
    Status hs = handshake(fd->get(), deadline, fatal);
    if (hs.ok()) return fd;
    if (*fatal) return hs;
    last = hs;
  }
  if (established_ && all_refused) {
    *fatal = true;
    return make_error(PG_ERR_STORE,
                      "the store server went away: it refuses connections now ({}); did rank 0 "
                      "exit?",
                      last.message());
  }
  return last;
}

Status TcpStoreClient::handshake(int fd, Deadline deadline, bool* fatal) {
  PG_ASSIGN_OR_RETURN(Bytes hello, read_frame(fd, deadline));
  FrameReader r(hello);
  auto op = static_cast<Op>(r.u8());
  if (op == Op::kError) {
    // E.g. too many connections: worth retrying.
    Status refused = error_from(std::span<const uint8_t>(hello).subspan(1));
    return make_error(PG_ERR_STORE, "the store refused the connection: {}", refused.message());
  }
  uint32_t magic = r.u32();
  uint8_t version = r.u8();
  bool auth_required = r.u8() != 0;
  auto nonce_bytes = r.raw(kNonceBytes, "nonce");
  if (op != Op::kHello || !r.finish() || magic != kProtocolMagic || version != kProtocolVersion) {
    *fatal = true;
    return make_error(PG_ERR_STORE,
                      "{} is not a procgroup store speaking protocol version {} (is "
                      "MASTER_PORT used by another program?)",
                      endpoint_, kProtocolVersion);
  }
  if (!auth_required) {
    if (!options_.token.empty()) {
      // It cannot prove it knows the token: rank 0 lacks it, or this is not our store.
      *fatal = true;
      return make_error(PG_ERR_AUTH,
                        "the store at {} does not check PROCGROUP_STORE_TOKEN but this rank has "
                        "one: give rank 0 the same token (or is another program on MASTER_PORT?)",
                        endpoint_);
    }
    return ok_status();
  }
  if (options_.token.empty()) {
    *fatal = true;
    return make_error(PG_ERR_AUTH, "store at {} requires PROCGROUP_STORE_TOKEN", endpoint_);
  }
  Nonce nonce{};
  std::copy(nonce_bytes.begin(), nonce_bytes.end(), nonce.begin());
  Mac mac = auth_answer(options_.token, nonce);
  PG_ASSIGN_OR_RETURN(Nonce mine, make_nonce());
  Bytes answer = FrameWriter(Op::kAuth).raw(mac).raw(mine).finish();
  PG_RETURN_IF_ERROR(send_all(fd, answer, deadline));
  auto reply = read_frame(fd, deadline);
  if (reply.ok() && !reply->empty() && reply->front() == static_cast<uint8_t>(Op::kValue)) {
    FrameReader proof_reader(*reply);
    proof_reader.u8();
    auto proof = proof_reader.str("store proof", kMacBytes);
    if (proof_reader.finish() && proof_verify(options_.token, mine, nonce, proof)) return ok_status();
    *fatal = true;
    return make_error(PG_ERR_AUTH,
                      "the store at {} did not prove it knows PROCGROUP_STORE_TOKEN (another "
                      "program on MASTER_PORT, or rank 0 has another token?)",
                      endpoint_);
  }
  if (reply.ok() && !reply->empty() && reply->front() == static_cast<uint8_t>(Op::kError)) {
    Status why = error_from(std::span<const uint8_t>(*reply).subspan(1));
    if (why.code() == PG_ERR_AUTH) {
      *fatal = true;
      return make_error(PG_ERR_AUTH, "store at {} rejected our PROCGROUP_STORE_TOKEN ({})",
                        endpoint_, why.message());
    }
    return why;
  }
  return reply.ok() ? make_error(PG_ERR_STORE, "unexpected reply to authentication")
                    : reply.status();
}

Result<TcpStoreClient::Reply> TcpStoreClient::call(std::string_view what, const Bytes& request,
                                                   Op expect, Deadline deadline) {
  // All pooled connections busy (or broken): open another, as patiently as at start.
  bool reused = false;
  auto taken = idle_.take_or_open(
      [&] { return open_connection(Deadline::after(options_.timeout).min(deadline)); }, &reused);
  if (!taken.ok()) return fail(what, taken.status());
  UniqueFd fd = std::move(taken).value();
  // On any I/O error fd is dropped: a late reply must never answer the next request.
  Status sent = send_all(fd.get(), request, deadline);
  auto body = sent.ok() ? read_frame(fd.get(), deadline) : Result<Bytes>(sent);
  if (!body.ok() && reused && body.status().code() == PG_ERR_STORE) {
    // The server had closed this idle connection (after an error that ends it, its ERROR
    // just read, or for sending nothing) without reading the request, which it answers
    // whenever it reads one: a fresh connection carries it once more.
    fd.reset();
    auto fresh = open_connection(Deadline::after(options_.timeout).min(deadline));
    if (!fresh.ok()) return fail(what, fresh.status());
    fd = std::move(fresh).value();
    sent = send_all(fd.get(), request, deadline);
    body = sent.ok() ? read_frame(fd.get(), deadline) : Result<Bytes>(sent);
  }
  if (!sent.ok()) return fail(what, sent);
  if (!body.ok()) {
    if (body.status().code() == PG_ERR_TIMEOUT) {
      return fail(what, make_error(PG_ERR_TIMEOUT, "no reply within the deadline"));
    }
    return fail(what, body.status());
  }
  auto op = static_cast<Op>(body->front());
  Bytes fields(body->begin() + 1, body->end());
  bool reusable = op == expect || op == Op::kError;
  if (reusable) {
    idle_.give_back(std::move(fd));
  }
  if (op == Op::kError) return fail(what, error_from(fields));
  if (op != expect) {
    return fail(what, make_error(PG_ERR_STORE, "unexpected reply '{}' (wanted '{}')", op_text(op),
                                 op_text(expect)));
  }
  return Reply{op, std::move(fields)};
}

Status TcpStoreClient::set(std::string_view key, std::span<const uint8_t> value) {
  PG_RETURN_IF_ERROR(validate_key(key));
  PG_RETURN_IF_ERROR(validate_value(key, value.size()));
  Bytes req = FrameWriter(Op::kSet).str(key).str(value).finish();
  auto what = fmt::format("set({})", printable_key(key));
  return call(what, req, Op::kOk, Deadline::after(options_.timeout)).status();
}

Result<Bytes> TcpStoreClient::get(std::string_view key, Millis timeout) {
  PG_RETURN_IF_ERROR(validate_key(key));
  Bytes req = FrameWriter(Op::kGet).i64(to_ms(timeout)).str(key).finish();
  auto what = fmt::format("get({})", printable_key(key));
  // The server answers at the timeout; the grace covers the reply's trip.
  Millis grace = std::clamp(options_.timeout, Millis(1000), Millis(30000));
  PG_ASSIGN_OR_RETURN(Reply reply,
                      call(what, req, Op::kValue, Deadline::after(wait_limit(timeout) + grace)));
  FrameReader r(reply.body);
  auto value = r.str("value", kMaxValueBytes);
  if (!r.finish()) return fail(what, make_error(PG_ERR_STORE, "{}", r.error()));
  return Bytes(value.begin(), value.end());
}

Result<int64_t> TcpStoreClient::add(std::string_view key, int64_t delta) {
  PG_RETURN_IF_ERROR(validate_key(key));
  Bytes req = FrameWriter(Op::kAdd).str(key).i64(delta).finish();
  auto what = fmt::format("add({})", printable_key(key));
  PG_ASSIGN_OR_RETURN(Reply reply, call(what, req, Op::kInt, Deadline::after(options_.timeout)));
  FrameReader r(reply.body);
  int64_t value = r.i64();
  if (!r.finish()) return fail(what, make_error(PG_ERR_STORE, "{}", r.error()));
  return value;
}

Result<Bytes> TcpStoreClient::compare_set(std::string_view key, std::span<const uint8_t> expected,
                                          std::span<const uint8_t> desired) {
  PG_RETURN_IF_ERROR(validate_key(key));
  PG_RETURN_IF_ERROR(validate_value(key, expected.size()));
  PG_RETURN_IF_ERROR(validate_value(key, desired.size()));
  Bytes req = FrameWriter(Op::kCompareSet).str(key).str(expected).str(desired).finish();
  auto what = fmt::format("compare_set({})", printable_key(key));
  PG_ASSIGN_OR_RETURN(Reply reply, call(what, req, Op::kValue, Deadline::after(options_.timeout)));
  FrameReader r(reply.body);
  auto value = r.str("value", kMaxValueBytes);
  if (!r.finish()) return fail(what, make_error(PG_ERR_STORE, "{}", r.error()));
  return Bytes(value.begin(), value.end());
}

Result<bool> TcpStoreClient::remove(std::string_view key) {
  PG_RETURN_IF_ERROR(validate_key(key));
  Bytes req = FrameWriter(Op::kRemove).str(key).finish();
  auto what = fmt::format("remove({})", printable_key(key));
  PG_ASSIGN_OR_RETURN(Reply reply, call(what, req, Op::kBool, Deadline::after(options_.timeout)));
  return !reply.body.empty() && reply.body[0] != 0;
}

Status TcpStoreClient::wait(std::span<const std::string> keys, Millis timeout) {
  if (keys.size() > kMaxKeysPerRequest) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "wait on {} keys; the limit is {}", keys.size(),
                      kMaxKeysPerRequest);
  }
  FrameWriter w(Op::kWait);
  w.i64(to_ms(timeout)).u32(static_cast<uint32_t>(keys.size()));
  for (const auto& key : keys) {
    PG_RETURN_IF_ERROR(validate_key(key));
    w.str(key);
  }
  Bytes req = w.finish();
  auto what = fmt::format("wait({})", printable_keys(keys));
  Millis grace = std::clamp(options_.timeout, Millis(1000), Millis(30000));
  return call(what, req, Op::kOk, Deadline::after(wait_limit(timeout) + grace)).status();
}

Result<bool> TcpStoreClient::check(std::span<const std::string> keys) {
  if (keys.size() > kMaxKeysPerRequest) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "check of {} keys; the limit is {}", keys.size(),
                      kMaxKeysPerRequest);
  }
  FrameWriter w(Op::kCheck);
  w.u32(static_cast<uint32_t>(keys.size()));
  for (const auto& key : keys) {
    PG_RETURN_IF_ERROR(validate_key(key));
    w.str(key);
  }
  Bytes req = w.finish();
  auto what = fmt::format("check({})", printable_keys(keys));
  PG_ASSIGN_OR_RETURN(Reply reply, call(what, req, Op::kBool, Deadline::after(options_.timeout)));
  return !reply.body.empty() && reply.body[0] != 0;
}

}  // namespace procgroup::detail
