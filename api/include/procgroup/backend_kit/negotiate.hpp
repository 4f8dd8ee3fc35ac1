// backend_kit/negotiate.hpp — pg_backend_negotiate in one call: the version range, the
// host services, the out struct's size, and only the fields that fit. Part of entry.hpp.
//
//   extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(
//       const pg_backend_negotiate_in_t* in, pg_backend_negotiate_out_t* out) {
//     return kit::negotiate(in, out, {.name = "mine", .description = "...", .ops = &kOps});
//   }
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "procgroup/backend_kit/op_table.hpp"
#include "procgroup/backend_kit/status.hpp"
#include "procgroup/procgroup_backend.h"

namespace procgroup::kit {

inline constexpr uint32_t kAllOps = (1u << PG_OP_COUNT_) - 1;
inline constexpr uint32_t kP2pOps = 1u << PG_OP_SEND | 1u << PG_OP_RECV;
inline constexpr uint32_t kAllDtypes = ((1u << PG_DTYPE_COUNT_) - 1) & ~(1u << PG_DTYPE_INVALID);
inline constexpr uint32_t kAllReduceOps = (1u << PG_REDUCE_COUNT_) - 1;

// Struct sizes the kit checks against (each "reaches this field").
inline constexpr size_t kHostKernelsSize =
    offsetof(pg_host_services_t, scale_down) + sizeof(pg_host_services_t::scale_down);
// The pointer fields' own size is meant: the struct must reach past the pointer.
inline constexpr size_t kNegotiateInHostSize =
    offsetof(pg_backend_negotiate_in_t, host) +
    sizeof(pg_backend_negotiate_in_t::host);  // NOLINT(bugprone-sizeof-expression)
inline constexpr size_t kNegotiateOutV1Size =
    offsetof(pg_backend_negotiate_out_t, ops) +
    sizeof(pg_backend_negotiate_out_t::ops);  // NOLINT(bugprone-sizeof-expression)
inline constexpr size_t kOpV1Size = offsetof(pg_backend_op_t, output) + sizeof(pg_buffer_t);

namespace detail {
inline std::atomic<const pg_host_services_t*>& negotiated_host_slot() {
  static std::atomic<const pg_host_services_t*> slot{nullptr};
  return slot;
}
}  // namespace detail

// The host services negotiation received (NULL before it): for a config from an older
// core, which carries none, and for the message of a call with a NULL handle.
inline const pg_host_services_t* negotiated_host() {
  return detail::negotiated_host_slot().load(std::memory_order_acquire);
}

// The answer to pg_backend_negotiate, apart from the table's native_ops (its non-NULL
// operation entries).
struct Offer {
  const char* name = nullptr;         // static, [a-z0-9_]+
  const char* description = nullptr;  // static, free text
  const pg_backend_ops_t* ops = nullptr;
  uint32_t native_dtypes = kAllDtypes;
  uint32_t native_reduce_ops = kAllReduceOps;
  uint32_t devices = 1u << PG_DEVICE_CPU;
  // How much of the host services the plugin calls: kHostSetErrorSize (log, set_error) or
  // kHostKernelsSize (also reduce and scale_down, which must then be non-NULL). A shorter
  // table is refused with PG_ERR_ABI_MISMATCH.
  size_t host_size = kHostSetErrorSize;
};

// Bit o set where ops has an entry for pg_op_t o.
inline uint32_t native_ops_of(const pg_backend_ops_t& ops) {
  uint32_t mask = 0;
  for (pg_op_t o = 0; o < PG_OP_COUNT_; ++o) {
    if (table_entry(ops, o) != nullptr) mask |= 1u << o;
  }
  return mask;
}

namespace detail {
inline Status vet_negotiation(const pg_backend_negotiate_in_t* in,
                              const pg_backend_negotiate_out_t* out, const Offer& offer) {
  const std::string name(offer.name);
  if (out == nullptr) {
    return Status::error(PG_ERR_INVALID_ARGUMENT, name + ": pg_backend_negotiate's out is NULL");
  }
  if (in->min_version > PG_BACKEND_INTERFACE_VERSION ||
      in->max_version < PG_BACKEND_INTERFACE_VERSION) {
    return Status::error(PG_ERR_ABI_MISMATCH,
                         name + " speaks backend interface version 1; the core offers " +
                             std::to_string(in->min_version) + ".." +
                             std::to_string(in->max_version));
  }
  const pg_host_services_t* host = in->host;
  const bool kernels = offer.host_size >= kHostKernelsSize;
  if (!reaches(host, offer.host_size) ||
      (kernels && (host->reduce == nullptr || host->scale_down == nullptr))) {
    return Status::error(PG_ERR_ABI_MISMATCH,
                         name + " needs the host's " +
                             (kernels ? "reduce and scale_down" : "set_error") + " services");
  }
  if (!reaches(out, kNegotiateOutV1Size)) {
    return Status::error(PG_ERR_ABI_MISMATCH, name + ": negotiate output struct_size " +
                                                  std::to_string(out->struct_size) +
                                                  " is too small");
  }
  return {};
}
}  // namespace detail

// pg_backend_negotiate for a plugin that speaks interface version 1: checks the version
// range, the host services (offer.host_size) and out's size, then fills version 1's fields
// of out and nothing past them (a newer core's larger out keeps its defaults) and keeps the
// host for negotiated_host(). A refusal fills nothing and says why through set_error when
// the host table reaches it.
inline pg_status_t negotiate(const pg_backend_negotiate_in_t* in, pg_backend_negotiate_out_t* out,
                             const Offer& offer) noexcept {
  if (in == nullptr) return PG_ERR_INVALID_ARGUMENT;  // nobody to tell
  // An input that does not reach the host pointer is another ABI.
  if (!reaches(in, kNegotiateInHostSize)) return PG_ERR_ABI_MISMATCH;
  const pg_host_services_t* host = in->host;
  if (!reaches(host, kHostSetErrorSize) || host->set_error == nullptr) {
    return PG_ERR_INVALID_ARGUMENT;  // a host that cannot even take a message
  }
  return firewall(host, offer.name, [&]() -> Status {
    PG_KIT_TRY(detail::vet_negotiation(in, out, offer));
    out->version = 1;
    out->name = offer.name;
    out->description = offer.description;
    out->native_ops = native_ops_of(*offer.ops);
    out->native_dtypes = offer.native_dtypes;
    out->native_reduce_ops = offer.native_reduce_ops;
    out->devices = offer.devices;
    out->ops = offer.ops;
    detail::negotiated_host_slot().store(host, std::memory_order_release);
    return {};
  });
}

}  // namespace procgroup::kit
