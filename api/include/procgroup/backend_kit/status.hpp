// backend_kit/status.hpp — the one (status, message) type of C++ plugins, its try macros,
// and the exception firewall every C entry runs behind. Header-only, over
// procgroup_backend.h; part of procgroup_backend_kit.hpp.
//
//   kit::Status connect(Peer& p) {
//     if (p.fd < 0) return kit::Status::error(PG_ERR_PEER_LOST, "mine: rank 2 is gone");
//     PG_KIT_TRY(p.handshake());                 // returns the Status if it is not ok
//     return {};
//   }
//   pg_status_t entry(...) {                     // a C entry: nothing escapes it
//     return kit::firewall(host, "mine: allreduce", [&] { return connect(peer); });
//   }
#pragma once

#include <cstddef>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "procgroup/procgroup_backend.h"

namespace procgroup::kit {

// PG_OK or an error code with the message the user will see (never thrown). An aggregate:
// `return {};` is success, `Status{code, message}` passes a work's result through.
struct Status {
  pg_status_t code = PG_OK;
  std::string message;
  bool ok() const { return code == PG_OK; }
  static Status error(pg_status_t code, std::string message) {
    return Status{code, std::move(message)};
  }
};

// Whether the struct at s (NULL: no) is at least size bytes long by its own struct_size:
// an append-only ABI struct from an older peer may end before a field.
template <class Struct>
constexpr bool reaches(const Struct* s, size_t size) {
  return s != nullptr && s->struct_size >= size;
}

// How far a host services table must reach for its set_error entry.
inline constexpr size_t kHostSetErrorSize =
    offsetof(pg_host_services_t, set_error) + sizeof(pg_host_services_t::set_error);

// Tells the core why an entry fails: host->set_error on this thread, when host has it.
inline void report(const pg_host_services_t* host, const char* message) noexcept {
  if (reaches(host, kHostSetErrorSize) && host->set_error != nullptr) {
    host->set_error(host->ctx, message);
  }
}

namespace detail {
// "<where>: <what>" reported; if even that string cannot be built, what alone.
inline void report_at(const pg_host_services_t* host, const char* where, const char* what,
                      const char* detail = "") noexcept {
  try {
    report(host, (std::string(where) + ": " + what + detail).c_str());
  } catch (...) {
    report(host, what);
  }
}
}  // namespace detail

// Runs body (returning Status) at a C entry: a failure's message goes to host->set_error
// (PG_PENDING is not a failure), std::bad_alloc becomes PG_ERR_OUT_OF_MEMORY and any other
// exception PG_ERR_INTERNAL, each with a message naming where. Never throws.
template <class Body>
pg_status_t firewall(const pg_host_services_t* host, const char* where, Body&& body) noexcept {
  try {
    Status st = std::forward<Body>(body)();
    if (st.code != PG_OK && st.code != PG_PENDING) report(host, st.message.c_str());
    return st.code;
  } catch (const std::bad_alloc&) {
    detail::report_at(host, where, "out of memory");
    return PG_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    detail::report_at(host, where, "internal error: ", e.what());
    return PG_ERR_INTERNAL;
  } catch (...) {
    detail::report_at(host, where, "internal error (unknown exception)");
    return PG_ERR_INTERNAL;
  }
}

template <class Body>
pg_status_t firewall(const pg_host_services_t* host, Body&& body) noexcept {
  return firewall(host, "backend", std::forward<Body>(body));
}

}  // namespace procgroup::kit

// Return-if-error: evaluates expr (a kit::Status) and returns it from the enclosing function
// when it is not ok. PG_KIT_CO_TRY is the same for a coroutine (co_return).
#define PG_KIT_TRY(expr)                              \
  do {                                                \
    ::procgroup::kit::Status pg_kit_status_ = (expr); \
    if (!pg_kit_status_.ok()) return pg_kit_status_;  \
  } while (0)

#define PG_KIT_CO_TRY(expr)                             \
  do {                                                  \
    ::procgroup::kit::Status pg_kit_status_ = (expr);   \
    if (!pg_kit_status_.ok()) co_return pg_kit_status_; \
  } while (0)
