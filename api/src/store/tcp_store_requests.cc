// The TCP store server's semantics: authentication, requests, and GET/WAIT held until
// their keys are set. Runs on the loop thread only.
#include <algorithm>

#include "common/log.h"
#include "store/tcp_store_loop.h"

namespace procgroup::detail {
namespace {

// Far enough for any rendezvous, near enough that time_point arithmetic cannot overflow.
constexpr int64_t kMaxWaitMs = int64_t{30} * 24 * 3600 * 1000;

Bytes ok_frame() { return FrameWriter(Op::kOk).finish(); }
Bytes bool_frame(bool v) { return FrameWriter(Op::kBool).u8(v ? 1 : 0).finish(); }
Bytes value_frame(std::span<const uint8_t> v) { return FrameWriter(Op::kValue).str(v).finish(); }

}  // namespace

void TcpStoreServer::Loop::send_hello(Connection& c) {
  bool auth = !options_.token.empty();
  if (auth) {
    auto nonce = make_nonce();
    if (!nonce.ok()) {
      fail(c, PG_ERR_INTERNAL, nonce.status().message());
      return;
    }
    c.nonce = nonce.value();
  } else {
    c.authenticated = true;
  }
  arm(c, TimerKind::kAuth, Clock::now() + options_.auth_timeout);
  queue(c, FrameWriter(Op::kHello)
               .u32(kProtocolMagic)
               .u8(kProtocolVersion)
               .u8(auth ? 1 : 0)
               .raw(c.nonce)
               .finish());
}

void TcpStoreServer::Loop::handle_frame(Connection& c, std::span<const uint8_t> body) {
  // Who may send what comes first, so an unauthenticated client learns that and no more.
  const uint8_t opcode = body.empty() ? 0 : body[0];
  if (is_request(opcode)) {
    const bool auth = static_cast<Op>(opcode) == Op::kAuth;
    if (!c.authenticated && !auth) {
      fail(c, PG_ERR_AUTH, "this store requires PROCGROUP_STORE_TOKEN authentication first");
      return;
    }
    if (c.authenticated && auth) {
      fail(c, PG_ERR_STORE, "unexpected auth command (already authenticated)");
      return;
    }
  }
  // A malformed frame closes the connection before anything changes.
  Result<Request> request = decode_request(body);
  if (!request.ok()) {
    fail(c, request.status().code(), request.status().message());
    return;
  }
  if (request->op == Op::kAuth) {
    handle_auth(c, *request);
  } else {
    handle_request(c, *request);
  }
}

void TcpStoreServer::Loop::handle_auth(Connection& c, const Request& request) {
  if (!auth_verify(options_.token, c.nonce, request.mac)) {
    fail(c, PG_ERR_AUTH, "wrong PROCGROUP_STORE_TOKEN");
    return;
  }
  c.authenticated = true;
  mark_spoke(c);
  const Mac proof = server_proof(options_.token, request.client_nonce, c.nonce);
  queue(c, FrameWriter(Op::kValue).str(std::span<const uint8_t>(proof)).finish());
}

void TcpStoreServer::Loop::mark_spoke(Connection& c) {
  if (c.spoke) return;
  c.spoke = true;
  silent_.erase(c.id);
  if (c.auth_at) timers_.erase({*c.auth_at, c.id, TimerKind::kAuth});
  c.auth_at.reset();
}

void TcpStoreServer::Loop::handle_request(Connection& c, const Request& r) {
  mark_spoke(c);
  const Op op = r.op;
  const std::vector<std::string>& keys = r.keys;
  // Request errors: answered, and the connection stays usable.
  for (const auto& key : keys) {
    Status valid = validate_key(key);
    if (!valid.ok()) {
      queue_error(c, valid.code(), valid.message());
      return;
    }
  }
  std::string key = keys.empty() ? std::string() : keys.front();
  auto found = keys.empty() ? data_.end() : data_.find(key);
  const Bytes* current = found == data_.end() ? nullptr : &found->second;
  switch (op) {
    case Op::kSet: {
      Status s = store_value(key, Bytes(r.value.begin(), r.value.end()));
      if (s.ok()) {
        queue(c, ok_frame());
      } else {
        queue_error(c, s.code(), s.message());
      }
      return;
    }
    case Op::kGet:
      if (current != nullptr) {
        queue(c, value_frame(*current));
        return;
      }
      start_wait(c, Waiter{Op::kGet, key, {key}, r.timeout_ms, {}});
      return;
    case Op::kAdd: {
      Result<int64_t> sum = apply_add(key, current, r.delta);
      Status s = sum.ok() ? store_value(key, counter_bytes(sum.value())) : sum.status();
      if (!s.ok()) {
        queue_error(c, s.code(), s.message());
        return;
      }
      queue(c, FrameWriter(Op::kInt).i64(sum.value()).finish());
      return;
    }
    case Op::kCompareSet: {
      if (!compare_matches(current, r.value)) {
        queue(c, value_frame(current != nullptr ? std::span<const uint8_t>(*current)
                                                : std::span<const uint8_t>()));
        return;
      }
      Status s = store_value(key, Bytes(r.desired.begin(), r.desired.end()));
      if (!s.ok()) {
        queue_error(c, s.code(), s.message());
        return;
      }
      queue(c, value_frame(r.desired));
      return;
    }
    case Op::kRemove:
      queue(c, bool_frame(found != data_.end()));
      if (found != data_.end()) {
        stored_bytes_ -= found->first.size() + found->second.size();
        data_.erase(found);
      }
      return;
    case Op::kWait: {
      Waiter w{Op::kWait, {}, {}, r.timeout_ms, {}};
      for (const auto& k : keys) {
        if (!data_.contains(k) &&
            std::find(w.missing.begin(), w.missing.end(), k) == w.missing.end()) {
          w.missing.push_back(k);
        }
      }
      if (w.missing.empty()) {
        queue(c, ok_frame());
        return;
      }
      start_wait(c, std::move(w));
      return;
    }
    case Op::kCheck: {
      bool all = std::all_of(keys.begin(), keys.end(),
                             [&](const std::string& k) { return data_.contains(k); });
      queue(c, bool_frame(all));
      return;
    }
    default: fail(c, PG_ERR_STORE, fmt::format("unexpected command {}", op_text(op))); return;
  }
}

Status TcpStoreServer::Loop::store_value(const std::string& key, Bytes value) {
  auto it = data_.find(key);
  const size_t old = it == data_.end() ? 0 : key.size() + it->second.size();
  const size_t now = key.size() + value.size();
  if (now > old && now - old > options_.max_bytes - std::min(options_.max_bytes, stored_bytes_)) {
    return make_error(PG_ERR_STORE,
                      "the store is full: {} of its {} bytes are used "
                      "(PROCGROUP_STORE_MAX_BYTES); cannot store {} bytes under key {}",
                      stored_bytes_, options_.max_bytes, value.size(), printable_key(key));
  }
  if (it == data_.end()) {
    if (data_.size() >= options_.max_keys) {
      return make_error(PG_ERR_STORE, "the store is full ({} keys); cannot add key {}",
                        data_.size(), printable_key(key));
    }
    data_.emplace(key, std::move(value));
  } else {
    it->second = std::move(value);
  }
  stored_bytes_ = stored_bytes_ - old + now;
  notify(key);
  return ok_status();
}

void TcpStoreServer::Loop::notify(const std::string& key) {
  auto it = waiting_on_.find(key);
  if (it == waiting_on_.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  waiting_on_.erase(it);
  for (uint64_t id : ids) {
    auto conn = connections_.find(id);
    if (conn == connections_.end() || !conn->second.waiter) continue;
    auto& missing = conn->second.waiter->missing;
    std::erase(missing, key);
    if (missing.empty()) complete_wait(conn->second);
  }
}

void TcpStoreServer::Loop::start_wait(Connection& c, Waiter waiter) {
  if (waiter.timeout_ms <= 0) {
    c.waiter = std::move(waiter);
    expire_wait(c);
    return;
  }
  waiter.deadline = Clock::now() + Millis(std::min(waiter.timeout_ms, kMaxWaitMs));
  for (const auto& key : waiter.missing) waiting_on_[key].push_back(c.id);
  timers_.emplace(waiter.deadline, c.id, TimerKind::kWaiter);
  c.waiter = std::move(waiter);
}

void TcpStoreServer::Loop::drop_wait(Connection& c) {
  if (!c.waiter) return;
  for (const auto& key : c.waiter->missing) {
    auto it = waiting_on_.find(key);
    if (it == waiting_on_.end()) continue;
    std::erase(it->second, c.id);
    if (it->second.empty()) waiting_on_.erase(it);
  }
  timers_.erase({c.waiter->deadline, c.id, TimerKind::kWaiter});
  c.waiter.reset();
}

void TcpStoreServer::Loop::complete_wait(Connection& c) {
  if (c.waiter->op == Op::kGet) {
    queue(c, value_frame(data_.at(c.waiter->get_key)));
  } else {
    queue(c, ok_frame());
  }
  drop_wait(c);
  ready_.push_back(c.id);  // parse its next request and flush, outside notify()
}

void TcpStoreServer::Loop::expire_wait(Connection& c) {
  const Waiter& w = *c.waiter;
  std::string what = w.op == Op::kGet ? fmt::format("key {} was", printable_key(w.get_key))
                                      : fmt::format("keys {} were", printable_keys(w.missing));
  queue_error(c, PG_ERR_TIMEOUT,
              fmt::format("{} not set within {} ms", what, std::max<int64_t>(w.timeout_ms, 0)));
  drop_wait(c);
  ready_.push_back(c.id);
}

}  // namespace procgroup::detail
