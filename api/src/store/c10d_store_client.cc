#include "store/c10d_store_client.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "store/store_protocol.h"

namespace procgroup::detail {

// Our names for the queries we send; code() maps them to the server's numbering.
enum class C10dStoreClient::Query : uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kDeleteKey
};

namespace {

// Indexed by Query. Legacy servers have no VALIDATE (never sent to them).
constexpr uint8_t kLegacyCodes[] = {0xff, 0, 1, 2, 3, 4, 5, 8};
constexpr uint8_t kValidatedCodes[] = {0, 1, 2, 3, 4, 5, 6, 8};
constexpr uint32_t kValidateMagic = 0x3C85F7CE;
constexpr uint8_t kReady = 0, kNotReady = 1;  // CHECK's answers
constexpr uint8_t kStopWaiting = 0;           // WAIT's

// torch's libuv server closes a connection that sends a longer key (its MAX_STRING_LEN).
constexpr size_t kMaxWireKeyBytes = 8 * 1024;
// A key nobody sets: the protocol probe deletes it, and each new connection checks it.
constexpr std::string_view kProbeKey = ".protocol-probe";
constexpr Millis kFirstBackoff{10};
constexpr Millis kMaxBackoff{1000};

// torch's servers memcpy integers in host byte order; so do we (client and server share
// an architecture in every deployment torch supports).
void put_u64(Bytes& out, uint64_t v) {
  uint8_t b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.insert(out.end(), b, b + sizeof v);
}
void put_str(Bytes& out, std::span<const uint8_t> s) {
  put_u64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}
void put_str(Bytes& out, std::string_view s) { put_str(out, as_bytes(s)); }

// A fixed-size integer of the reply.
template <class T>
Result<T> read_int(int fd, Deadline deadline) {
  uint8_t b[sizeof(T)];
  PG_RETURN_IF_ERROR(recv_exact(fd, b, deadline));
  T v;
  std::memcpy(&v, b, sizeof v);
  return v;
}

template <class T>
Status take(Result<T> result, T& out) {
  if (!result.ok()) return result.status();
  out = std::move(result).value();
  return ok_status();
}

Result<Bytes> read_value(int fd, Deadline deadline) {
  PG_ASSIGN_OR_RETURN(int64_t length, read_int<int64_t>(fd, deadline));
  // Bounded before allocating: a confused peer must not make us reserve gigabytes.
  if (length < 0 || static_cast<uint64_t>(length) > kMaxValueBytes) {
    return make_error(PG_ERR_STORE, "malformed reply: a value of {} bytes", length);
  }
  Bytes value(static_cast<size_t>(length));
  PG_RETURN_IF_ERROR(recv_exact(fd, value, deadline));
  return value;
}

// Far enough for any rendezvous, near enough that deadline arithmetic cannot overflow.
Millis wait_limit(Millis timeout) {
  return std::clamp(timeout, Millis(0), Millis(int64_t{30} * 24 * 3600 * 1000));
}

const char* protocol_text(C10dStoreClient::Protocol p) {
  return p == C10dStoreClient::Protocol::kLegacy ? "torch 1.13-2.2, no VALIDATE"
                                                 : "torch 2.3+, VALIDATE first";
}

}  // namespace

C10dStoreClient::C10dStoreClient(C10dStoreClientOptions options)
    : options_(std::move(options)),
      description_(
          fmt::format("{} at {}", options_.name, host_port(options_.host, options_.port))) {}

Result<std::unique_ptr<C10dStoreClient>> C10dStoreClient::connect(C10dStoreClientOptions options) {
  if (options.port <= 0 || options.port > 65535) {
    return make_error(PG_ERR_CONFIG, "c10d store port {} is out of range 1..65535", options.port);
  }
  if (1 + options.key_prefix.size() + kMaxKeyBytes > kMaxWireKeyBytes) {
    return make_error(PG_ERR_CONFIG, "c10d store key prefix of {} bytes is too long",
                      options.key_prefix.size());
  }
  std::unique_ptr<C10dStoreClient> client(new C10dStoreClient(std::move(options)));
  const Deadline deadline = Deadline::after(client->options_.timeout);
  PG_ASSIGN_OR_RETURN(client->protocol_, client->detect_protocol(deadline));
  PG_ASSIGN_OR_RETURN(UniqueFd fd, client->open_connection(deadline));
  client->idle_.give_back(std::move(fd));
  log(kLogInfo, "store", "joined {} ({}), keys under '{}'", client->description_,
      protocol_text(client->protocol_), client->options_.key_prefix);
  return client;
}

// Why this probe, and why it is safe on both kinds of server: see the header.
Result<C10dStoreClient::Protocol> C10dStoreClient::detect_protocol(Deadline deadline) {
  PG_ASSIGN_OR_RETURN(UniqueFd fd, connect_retrying(deadline));
  Bytes probe{kLegacyCodes[static_cast<int>(Query::kDeleteKey)]};
  put_str(probe, wire_key(kProbeKey));
  Status sent = send_all(fd.get(), probe, deadline);
  if (!sent.ok()) return fail("sending the protocol probe", sent);
  ::shutdown(fd.get(), SHUT_WR);
  Bytes got;
  bool closed = false;
  while (!closed && got.size() <= sizeof(int64_t)) {
    PG_ASSIGN_OR_RETURN(short revents, wait_fd(fd.get(), POLLIN, deadline));
    if (revents == 0) {
      return make_error(PG_ERR_STORE,
                        "{} gave no answer to the protocol probe within {} ms (timed out: is "
                        "it a torch TCPStore, and is it responsive?)",
                        description_, options_.timeout.count());
    }
    uint8_t buf[16];
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n > 0) {
      got.insert(got.end(), buf, buf + n);
    } else if (n == 0 || errno == ECONNRESET) {
      closed = true;
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return make_error(PG_ERR_STORE, "{}: receive failed: {}", description_, errno_text(errno));
    }
  }
  if (got.empty()) return Protocol::kValidated;
  int64_t deleted = -1;
  if (got.size() == sizeof deleted) std::memcpy(&deleted, got.data(), sizeof deleted);
  if (closed && (deleted == 0 || deleted == 1)) return Protocol::kLegacy;
  return make_error(PG_ERR_STORE,
                    "{} speaks an unknown protocol: it answered a TCPStore DELETE_KEY with {}{} "
                    "bytes (another program on MASTER_PORT? procgroup's own store is tcp://)",
                    description_, got.size() > sizeof(int64_t) ? "at least " : "", got.size());
}

Result<UniqueFd> C10dStoreClient::connect_retrying(Deadline deadline) {
  Millis backoff = kFirstBackoff;
  Status last;
  for (;;) {
    auto addrs = resolve_tcp(options_.host, options_.port, false);
    Status tried = addrs.status();
    for (const addrinfo* ai = addrs.ok() ? addrs->head() : nullptr; ai; ai = ai->ai_next) {
      auto fd = connect_once(ai->ai_addr, ai->ai_addrlen, deadline);
      if (fd.ok()) return fd;
      tried = fd.status();
    }
    // A late timeout says less than an earlier refusal.
    if (last.ok() || tried.code() != PG_ERR_TIMEOUT) last = tried;
    if (deadline.expired()) break;
    std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  return make_error(PG_ERR_STORE,
                    "cannot connect to {} within {} ms: {} (is the process that hosts it still "
                    "running, and do MASTER_ADDR and MASTER_PORT point at it?)",
                    description_, options_.timeout.count(), last.message());
}

Result<UniqueFd> C10dStoreClient::open_connection(Deadline deadline) {
  PG_ASSIGN_OR_RETURN(UniqueFd fd, connect_retrying(deadline));
  Bytes hello;
  if (protocol_ == Protocol::kValidated) {
    hello = request(Query::kValidate);
    uint8_t magic[sizeof kValidateMagic];
    std::memcpy(magic, &kValidateMagic, sizeof magic);
    hello.insert(hello.end(), magic, magic + sizeof magic);
  }
  // A CHECK answered with READY or NOT_READY shows the server reads our numbering.
  const std::string probe[] = {std::string(kProbeKey)};
  Bytes check = key_list(Query::kCheck, probe);
  hello.insert(hello.end(), check.begin(), check.end());
  Status sent = send_all(fd.get(), hello, deadline);
  auto answer = sent.ok() ? read_int<uint8_t>(fd.get(), deadline) : Result<uint8_t>(sent);
  if (!answer.ok()) {
    return make_error(PG_ERR_STORE, "{} ({}) did not answer a first CHECK: {}", description_,
                      protocol_text(protocol_), answer.status().message());
  }
  if (*answer != kReady && *answer != kNotReady) {
    return make_error(PG_ERR_STORE, "{} speaks an unknown protocol: CHECK answered {}",
                      description_, *answer);
  }
  return fd;
}

Result<C10dStoreClient::Reply> C10dStoreClient::call(std::string_view what, const Bytes& request,
                                                     ReplyKind kind, Deadline deadline) {
  // All pooled connections busy (or broken): open another, as patiently as at start.
  auto taken = idle_.take_or_open(
      [&] { return open_connection(Deadline::after(options_.timeout).min(deadline)); });
  if (!taken.ok()) return fail(what, taken.status());
  UniqueFd fd = std::move(taken).value();
  // On any error fd is dropped, and a server drops a closed connection's WAIT with it.
  Status sent = send_all(fd.get(), request, deadline);
  if (!sent.ok()) return fail(what, sent);
  Reply reply;
  Status got = kind == ReplyKind::kByte ? take(read_int<uint8_t>(fd.get(), deadline), reply.byte)
               : kind == ReplyKind::kInt
                   ? take(read_int<int64_t>(fd.get(), deadline), reply.integer)
                   : take(read_value(fd.get(), deadline), reply.value);
  if (!got.ok()) return fail(what, got);
  idle_.give_back(std::move(fd));
  return reply;
}

uint8_t C10dStoreClient::code(Query query) const {
  const auto i = static_cast<size_t>(query);
  return protocol_ == Protocol::kLegacy ? kLegacyCodes[i] : kValidatedCodes[i];
}

Bytes C10dStoreClient::request(Query query) const { return Bytes{code(query)}; }

Bytes C10dStoreClient::key_list(Query query, std::span<const std::string> keys) const {
  Bytes out = request(query);
  put_u64(out, keys.size());
  for (const auto& key : keys) put_str(out, wire_key(key));
  return out;
}

std::string C10dStoreClient::wire_key(std::string_view key) const {
  // torch's TCPStore puts "/" before every key it sends.
  return "/" + options_.key_prefix + std::string(key);
}

Status C10dStoreClient::fail(std::string_view what, const Status& cause) const {
  return Status(cause.code(), fmt::format("{} on {}: {}", what, description_, cause.message()));
}

Status C10dStoreClient::set(std::string_view key, std::span<const uint8_t> value) {
  PG_RETURN_IF_ERROR(validate_key(key));
  if (value.size() > kMaxC10dValueBytes) {
    return make_error(PG_ERR_INVALID_ARGUMENT,
                      "value of {} bytes for key {} is over the {} MiB a torch store accepts",
                      value.size(), printable_key(key), kMaxC10dValueBytes >> 20);
  }
  Bytes req = request(Query::kSet);
  put_str(req, wire_key(key));
  put_str(req, value);
  // SET has no reply. A CHECK behind it on the same connection is answered only after the
  // server stored the value, so set() returns once every client can see it.
  const std::string keys[] = {std::string(key)};
  Bytes check = key_list(Query::kCheck, keys);
  req.insert(req.end(), check.begin(), check.end());
  auto what = fmt::format("set({})", printable_key(key));
  PG_ASSIGN_OR_RETURN(Reply reply,
                      call(what, req, ReplyKind::kByte, Deadline::after(options_.timeout)));
  if (reply.byte != kReady && reply.byte != kNotReady) {
    return fail(what, make_error(PG_ERR_STORE, "unexpected reply {} to CHECK", reply.byte));
  }
  return ok_status();
}

Result<Bytes> C10dStoreClient::get(std::string_view key, Millis timeout) {
  PG_RETURN_IF_ERROR(validate_key(key));
  auto what = fmt::format("get({})", printable_key(key));
  // Never GET an absent key: a legacy server answers that by closing the connection. WAIT
  // has no server-side timeout; our socket deadline is the timeout.
  const std::string keys[] = {std::string(key)};
  Bytes wait_req = key_list(Query::kWait, keys);
  auto waited = call(what, wait_req, ReplyKind::kByte, Deadline::after(wait_limit(timeout)));
  if (!waited.ok() && waited.status().code() == PG_ERR_TIMEOUT) {
    return make_error(PG_ERR_TIMEOUT, "{} on {}: key {} was not set within {} ms", what,
                      description_, printable_key(key), timeout.count());
  }
  if (!waited.ok()) return waited.status();
  if (waited->byte != kStopWaiting) {
    return fail(what, make_error(PG_ERR_STORE, "unexpected reply {} to WAIT", waited->byte));
  }
  Bytes get_req = request(Query::kGet);
  put_str(get_req, wire_key(key));
  PG_ASSIGN_OR_RETURN(Reply reply,
                      call(what, get_req, ReplyKind::kValue, Deadline::after(options_.timeout)));
  return std::move(reply.value);
}

Result<int64_t> C10dStoreClient::add(std::string_view key, int64_t delta) {
  PG_RETURN_IF_ERROR(validate_key(key));
  Bytes req = request(Query::kAdd);
  put_str(req, wire_key(key));
  put_u64(req, static_cast<uint64_t>(delta));
  auto what = fmt::format("add({})", printable_key(key));
  auto reply = call(what, req, ReplyKind::kInt, Deadline::after(options_.timeout));
  if (!reply.ok() && reply.status().code() == PG_ERR_STORE) {
    // torch's server parses the value with std::stoll and drops the connection if it cannot.
    return Status(PG_ERR_STORE, reply.status().message() +
                                    " (a torch store closes the connection when the value is "
                                    "not a decimal integer or the sum overflows)");
  }
  if (!reply.ok()) return reply.status();
  return reply->integer;
}

Result<Bytes> C10dStoreClient::compare_set(std::string_view key, std::span<const uint8_t> expected,
                                           std::span<const uint8_t> desired) {
  PG_RETURN_IF_ERROR(validate_key(key));
  if (std::max(expected.size(), desired.size()) > kMaxC10dValueBytes) {
    return make_error(PG_ERR_INVALID_ARGUMENT,
                      "compare_set of key {}: a value is over the {} MiB a torch store accepts",
                      printable_key(key), kMaxC10dValueBytes >> 20);
  }
  Bytes req = request(Query::kCompareSet);
  put_str(req, wire_key(key));
  put_str(req, expected);
  put_str(req, desired);
  auto what = fmt::format("compare_set({})", printable_key(key));
  PG_ASSIGN_OR_RETURN(Reply reply,
                      call(what, req, ReplyKind::kValue, Deadline::after(options_.timeout)));
  // For an absent key and a non-empty expected, torch answers expected itself where our
  // stores answer "absent" (empty). A present key equal to expected would have become
  // desired, so that answer means absent unless expected == desired: then we ask.
  if (!expected.empty() && std::ranges::equal(reply.value, expected)) {
    if (!std::ranges::equal(expected, desired)) return Bytes();
    const std::string keys[] = {std::string(key)};
    PG_ASSIGN_OR_RETURN(bool present, check(keys));
    if (!present) return Bytes();
  }
  return std::move(reply.value);
}

Result<bool> C10dStoreClient::remove(std::string_view key) {
  PG_RETURN_IF_ERROR(validate_key(key));
  Bytes req = request(Query::kDeleteKey);
  put_str(req, wire_key(key));
  auto what = fmt::format("remove({})", printable_key(key));
  PG_ASSIGN_OR_RETURN(Reply reply,
                      call(what, req, ReplyKind::kInt, Deadline::after(options_.timeout)));
  return reply.integer > 0;
}

Status C10dStoreClient::wait(std::span<const std::string> keys, Millis timeout) {
  if (keys.size() > kMaxKeysPerRequest) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "wait on {} keys; the limit is {}", keys.size(),
                      kMaxKeysPerRequest);
  }
  for (const auto& key : keys) PG_RETURN_IF_ERROR(validate_key(key));
  if (keys.empty()) return ok_status();  // nothing to wait for (and never an empty WAIT)
  Bytes req = key_list(Query::kWait, keys);
  auto what = fmt::format("wait({})", printable_keys(keys));
  auto reply = call(what, req, ReplyKind::kByte, Deadline::after(wait_limit(timeout)));
  if (!reply.ok() && reply.status().code() == PG_ERR_TIMEOUT) {
    return make_error(PG_ERR_TIMEOUT, "wait on {}: keys {} were not set within {} ms", description_,
                      printable_keys(keys), timeout.count());
  }
  if (!reply.ok()) return reply.status();
  if (reply->byte != kStopWaiting) {
    return fail(what, make_error(PG_ERR_STORE, "unexpected reply {} to WAIT", reply->byte));
  }
  return ok_status();
}

Result<bool> C10dStoreClient::check(std::span<const std::string> keys) {
  if (keys.size() > kMaxKeysPerRequest) {
    return make_error(PG_ERR_INVALID_ARGUMENT, "check of {} keys; the limit is {}", keys.size(),
                      kMaxKeysPerRequest);
  }
  for (const auto& key : keys) PG_RETURN_IF_ERROR(validate_key(key));
  if (keys.empty()) return true;  // all of no keys exist (and never an empty CHECK)
  Bytes req = key_list(Query::kCheck, keys);
  auto what = fmt::format("check({})", printable_keys(keys));
  PG_ASSIGN_OR_RETURN(Reply reply,
                      call(what, req, ReplyKind::kByte, Deadline::after(options_.timeout)));
  if (reply.byte != kReady && reply.byte != kNotReady) {
    return fail(what, make_error(PG_ERR_STORE, "unexpected reply {} to CHECK", reply.byte));
  }
  return reply.byte == kReady;
}

}  // namespace procgroup::detail
