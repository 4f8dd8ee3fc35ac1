// Private to the TCP store server: the event loop's state. tcp_store_server.cc holds the
// socket side (accept, read, write, timers); tcp_store_requests.cc the store's semantics
// (requests, authentication, waiting for keys).
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "store/socket_util.h"
#include "store/store_auth.h"
#include "store/store_protocol.h"
#include "store/tcp_store_server.h"

namespace procgroup::detail {

class TcpStoreServer::Loop {
 public:
  Loop(TcpStoreServerOptions options, std::vector<UniqueFd> listeners, UniqueFd epoll,
       UniqueFd wake);
  // Serves until stop() is called.
  void run();
  // Safe from any thread.
  void stop();

 private:
  enum class TimerKind : uint8_t { kAuth, kWaiter, kStall, kLinger, kResumeAccept };
  using Timer = std::tuple<Clock::time_point, uint64_t /*connection*/, TimerKind>;

  // A GET or WAIT held until its keys exist or its deadline passes.
  struct Waiter {
    Op op = Op::kGet;
    std::string get_key;               // GET: the key whose value is the reply
    std::vector<std::string> missing;  // keys not yet set
    int64_t timeout_ms = 0;
    Clock::time_point deadline;
  };

  struct Connection {
    uint64_t id = 0;
    UniqueFd fd;
    std::string peer;
    Bytes in;   // received, not yet parsed (at most one frame plus header)
    Bytes out;  // replies not yet sent, from out_sent on
    size_t out_sent = 0;
    bool authenticated = false;
    bool spoke = false;  // authenticated (token) or sent a request (none): not evictable
    Nonce nonce{};
    bool lingering = false;  // a fatal ERROR is queued: flush, shut down, discard input
    bool write_shut = false;
    bool eof = false;        // the peer closed its side
    bool close_now = false;  // closed by the top-level handler once it returns
    std::optional<Waiter> waiter;
    Clock::time_point last_input;
    // Armed timers, so close can cancel them.
    std::optional<Clock::time_point> auth_at, stall_at, linger_at;
    uint32_t interest = 0;
    size_t reserved = 0;  // bytes of max_bytes held for the frame being received
  };

  // ---- tcp_store_server.cc ----
  void accept_all(size_t listener);
  // Closes the oldest connection that has not spoken yet; false if there is none.
  bool evict_silent(std::string_view why);
  // Holds length bytes of max_bytes for c's incoming frame; false if the store is full.
  bool reserve(Connection& c, uint64_t length);
  void release(Connection& c);
  void set_accepting(bool on);
  void on_event(uint64_t id, uint32_t events);
  void read_input(Connection& c, uint32_t events);
  void flush(Connection& c);
  // Flushes, then closes or re-registers c, as its flags say. c is invalid afterwards.
  void settle(Connection& c);
  void close_connection(uint64_t id);
  void process_input(Connection& c);
  void queue(Connection& c, Bytes frame);
  void queue_error(Connection& c, pg_status_t code, std::string_view message);
  // Queues ERROR and closes c once it is flushed (or kLingerTimeout passes).
  void fail(Connection& c, pg_status_t code, std::string_view message);
  void arm(Connection& c, TimerKind kind, Clock::time_point at);
  void fire_timers();
  void run_ready();
  int next_timeout_ms() const;
  size_t input_limit(const Connection& c) const;
  static size_t pending_out(const Connection& c) { return c.out.size() - c.out_sent; }

  // ---- tcp_store_requests.cc ----
  void send_hello(Connection& c);
  void handle_frame(Connection& c, std::span<const uint8_t> body);
  void handle_auth(Connection& c, const Request& request);
  void handle_request(Connection& c, const Request& request);
  void mark_spoke(Connection& c);
  // Stores value (limits checked) and wakes waiters of key.
  Status store_value(const std::string& key, Bytes value);
  void notify(const std::string& key);
  void start_wait(Connection& c, Waiter waiter);
  void complete_wait(Connection& c);
  void expire_wait(Connection& c);
  void drop_wait(Connection& c);

  static constexpr uint64_t kWakeId = 0;
  static constexpr uint64_t kListenerIdBase = 1;
  static constexpr uint64_t kFirstConnectionId = 1024;

  TcpStoreServerOptions options_;
  std::vector<UniqueFd> listeners_;
  UniqueFd epoll_;
  UniqueFd wake_;
  std::atomic<bool> stop_{false};
  bool accepting_ = true;

  std::unordered_map<uint64_t, Connection> connections_;
  uint64_t next_id_ = kFirstConnectionId;
  std::unordered_map<std::string, Bytes> data_;
  size_t stored_bytes_ = 0;    // keys + values in data_
  size_t reserved_bytes_ = 0;  // frames being received (Connection::reserved)
  std::set<uint64_t> silent_;  // connections that have not spoken, oldest first
  bool warned_evicting_ = false;
  std::unordered_map<std::string, std::vector<uint64_t>> waiting_on_;  // key -> connections
  std::set<Timer> timers_;
  std::vector<uint64_t> ready_;  // waits completed: their next requests can be parsed
};

}  // namespace procgroup::detail
