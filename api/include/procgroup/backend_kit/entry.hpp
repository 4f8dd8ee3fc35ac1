// backend_kit/entry.hpp — a plugin's C surface from one C++ group class: make_ops<Group>()
// builds the pg_backend_ops_t (each entry behind the exception firewall, arguments checked)
// and negotiate() (negotiate.hpp) answers pg_backend_negotiate. The plugin keeps only how
// bytes move.
//
//   class MyGroup {
//    public:
//     static constexpr const char* kName = "mine";  // starts every message of the kit
//     static kit::Status create(const pg_backend_group_config_t& config,   // checked already
//                               const pg_host_services_t* host, std::unique_ptr<MyGroup>* out);
//     kit::Status submit(const pg_backend_op_t& op, std::shared_ptr<MyWork>* out);
//     void abort();
//   };  // MyWork: pg_status_t test(std::string*), wait(int64_t timeout_ms, std::string*),
//       // or kit::Status test(), wait(int64_t timeout_ms)
//   constexpr pg_backend_ops_t kOps = kit::make_ops<MyGroup>(kit::kAllOps);
//   extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(
//       const pg_backend_negotiate_in_t* in, pg_backend_negotiate_out_t* out) {
//     return kit::negotiate(in, out, {.name = "mine", .description = "...", .ops = &kOps});
//   }
//
// Optional members, used when present: Group::shutdown() (group_destroy, before the
// handle lets the group go; a Status it returns is group_destroy's), Group::split(color, key,
// config, GroupPtr*) (group_split; config is passed unchecked: a split is collective, so the plugin
// checks it in agreement with the other ranks), and Work::notify_on_complete(done, user) -> bool
// (work_on_complete). create's and submit's last parameters say how handles own groups and works
// (unique_ptr, shared_ptr or any owning reference with ->).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "procgroup/backend_kit/negotiate.hpp"
#include "procgroup/backend_kit/op_table.hpp"
#include "procgroup/backend_kit/status.hpp"
#include "procgroup/procgroup_backend.h"

namespace procgroup::kit {

// The host services for a group: the config's own, else the negotiated ones.
inline const pg_host_services_t* host_of(const pg_backend_group_config_t* config) {
  if (reaches(config, PG_BACKEND_GROUP_CONFIG_HOST_SIZE) && config->host != nullptr) {
    return config->host;
  }
  return negotiated_host();
}

// What every plugin needs of a group config; messages start with where.
inline Status check_config(const pg_backend_group_config_t* c, const std::string& where) {
  auto bad = [&](const std::string& what) {
    return Status::error(PG_ERR_INVALID_ARGUMENT, where + ": " + what);
  };
  if (c == nullptr) return bad("config is NULL");
  if (!reaches(c, PG_BACKEND_GROUP_CONFIG_V1_SIZE)) {
    return bad("config struct_size " + std::to_string(c->struct_size) + " is too small");
  }
  if (c->size < 1 || c->rank < 0 || c->rank >= c->size) {
    return bad("rank " + std::to_string(c->rank) + " is not within a group of size " +
               std::to_string(c->size));
  }
  if (c->timeout_ms <= 0) return bad("timeout_ms must be > 0");
  if (c->group_id == nullptr) return bad("group_id is NULL");
  const pg_host_store_t* s = c->store;
  constexpr size_t kStoreV1 = offsetof(pg_host_store_t, remove) + sizeof(pg_host_store_t::remove);
  if (!reaches(s, kStoreV1) || s->set == nullptr || s->get == nullptr || s->free_value == nullptr) {
    return bad("the store is missing or incomplete (set, get and free_value are needed)");
  }
  return {};
}

namespace detail {

// The pointee type of a function's last parameter: how create/submit hand out ownership.
template <class Fn>
struct last_out;
template <class R, class... A>
struct last_out<R (*)(A...)> {
  using type = std::remove_pointer_t<std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>>;
};
template <class R, class C, class... A>
struct last_out<R (C::*)(A...)> : last_out<R (*)(A...)> {};

template <class Group>
struct Entries {
  using GroupPtr = typename last_out<decltype(&Group::create)>::type;
  using WorkRef = typename last_out<decltype(&Group::submit)>::type;
  // What pg_backend_group_t and pg_backend_work_t point at: the object and its host.
  struct GroupBox {
    const pg_host_services_t* host;
    GroupPtr group;
  };
  struct WorkBox {
    const pg_host_services_t* host;
    WorkRef work;
  };
  static GroupBox* box(pg_backend_group_t g) { return reinterpret_cast<GroupBox*>(g); }
  static WorkBox* box(pg_backend_work_t w) { return reinterpret_cast<WorkBox*>(w); }
  template <class Box>
  static const pg_host_services_t* host(const Box* b) {
    return b != nullptr ? b->host : negotiated_host();
  }
  static Status invalid(const char* entry, const std::string& what) {
    return Status::error(PG_ERR_INVALID_ARGUMENT,
                         std::string(Group::kName) + ": " + entry + ": " + what);
  }
  template <class Body>
  static pg_status_t guard(const pg_host_services_t* h, Body&& body) noexcept {
    return firewall(h, Group::kName, std::forward<Body>(body));
  }

  static pg_status_t group_create(const pg_backend_group_config_t* config,
                                  pg_backend_group_t* out) {
    const pg_host_services_t* h = host_of(config);
    return guard(h, [&]() -> Status {
      if (out == nullptr) return invalid("group_create", "out is NULL");
      *out = nullptr;
      PG_KIT_TRY(check_config(config, std::string(Group::kName) + ": group_create"));
      if (h == nullptr) {
        return Status::error(PG_ERR_INTERNAL, std::string(Group::kName) +
                                                  ": group_create before pg_backend_negotiate");
      }
      auto made = std::make_unique<GroupBox>(GroupBox{h, {}});
      PG_KIT_TRY(Group::create(*config, h, &made->group));
      *out = reinterpret_cast<pg_backend_group_t>(made.release());
      return {};
    });
  }

  static pg_status_t group_split(pg_backend_group_t parent, int32_t color, int32_t key,
                                 const pg_backend_group_config_t* config, pg_backend_group_t* out) {
    GroupBox* p = box(parent);
    return guard(host(p), [&]() -> Status {
      if (p == nullptr || out == nullptr) return invalid("group_split", "parent or out is NULL");
      *out = nullptr;
      const pg_host_services_t* h = config != nullptr ? host_of(config) : p->host;
      auto made = std::make_unique<GroupBox>(GroupBox{h != nullptr ? h : p->host, {}});
      PG_KIT_TRY(p->group->split(color, key, config, &made->group));
      if (made->group) *out = reinterpret_cast<pg_backend_group_t>(made.release());
      return {};
    });
  }

  static pg_status_t group_destroy(pg_backend_group_t group) {
    GroupBox* g = box(group);
    return guard(host(g), [&]() -> Status {
      if (g == nullptr) return invalid("group_destroy", "group is NULL");
      std::unique_ptr<GroupBox> owned(g);
      if constexpr (requires { owned->group->shutdown(); }) {
        if constexpr (std::same_as<decltype(owned->group->shutdown()), Status>) {
          return owned->group->shutdown();  // the handle goes either way
        } else {
          owned->group->shutdown();
        }
      }
      return {};
    });
  }

  static pg_status_t group_abort(pg_backend_group_t group) {
    GroupBox* g = box(group);
    return guard(host(g), [&]() -> Status {
      if (g == nullptr) return invalid("group_abort", "group is NULL");
      g->group->abort();
      return {};
    });
  }

  static pg_status_t work_test(pg_backend_work_t work) {
    WorkBox* w = box(work);
    return guard(host(w), [&]() -> Status {
      if (w == nullptr) return invalid("work_test", "work is NULL");
      if constexpr (requires {
                      { w->work->test() } -> std::same_as<Status>;
                    }) {
        return w->work->test();
      } else {
        std::string message;
        const pg_status_t st = w->work->test(&message);
        return Status{st, std::move(message)};
      }
    });
  }

  static pg_status_t work_wait(pg_backend_work_t work, int64_t timeout_ms) {
    WorkBox* w = box(work);
    return guard(host(w), [&]() -> Status {
      if (w == nullptr) return invalid("work_wait", "work is NULL");
      if constexpr (requires {
                      { w->work->wait(timeout_ms) } -> std::same_as<Status>;
                    }) {
        return w->work->wait(timeout_ms);
      } else {
        std::string message;
        const pg_status_t st = w->work->wait(timeout_ms, &message);
        return Status{st, std::move(message)};
      }
    });
  }

  // A pending work goes on without its handle: the plugin holds its own reference.
  static void work_release(pg_backend_work_t work) {
    WorkBox* w = box(work);
    (void)guard(host(w), [&]() -> Status {
      delete w;
      return {};
    });
  }

  static pg_status_t work_on_complete(pg_backend_work_t work, pg_backend_work_done_fn done,
                                      void* user) {
    WorkBox* w = box(work);
    return guard(host(w), [&]() -> Status {
      if (w == nullptr || done == nullptr) {
        return invalid("work_on_complete", "work and done must not be NULL");
      }
      if (!w->work->notify_on_complete(done, user)) {
        return invalid("work_on_complete", "a completion notice was asked for this work already");
      }
      return {};
    });
  }

  template <pg_op_t kOp>
  static pg_status_t submit(pg_backend_group_t group, const pg_backend_op_t* op,
                            pg_backend_work_t* work) {
    GroupBox* g = box(group);
    return guard(host(g), [&]() -> Status {
      const char* name = op_name(kOp);
      if (g == nullptr || op == nullptr || work == nullptr) {
        return invalid(name, "group, op and work must not be NULL");
      }
      *work = nullptr;
      if (!reaches(op, kOpV1Size)) {
        return invalid(name, "op struct_size " + std::to_string(op->struct_size) + " is too small");
      }
      if (op->op != kOp) {
        return Status::error(PG_ERR_INVALID_ARGUMENT,
                             std::string(Group::kName) + ": " + name + " entry called with op " +
                                 std::to_string(op->op) + " (" + op_name(op->op) + ")");
      }
      // An older core's op ends before the planned fields: the group gets a whole struct
      // (zero past struct_size, which it keeps), so it may copy or read any field.
      pg_backend_op_t whole{};
      if (op->struct_size < sizeof(whole)) {
        std::memcpy(&whole, op, op->struct_size);
        op = &whole;
      }
      auto made = std::make_unique<WorkBox>(WorkBox{g->host, {}});
      PG_KIT_TRY(g->group->submit(*op, &made->work));
      *work = reinterpret_cast<pg_backend_work_t>(made.release());
      return {};
    });
  }

  template <pg_op_t kOp>
  static constexpr pg_backend_op_fn op_entry(uint32_t native_ops) {
    return (native_ops >> kOp & 1u) != 0 ? &submit<kOp> : nullptr;
  }
};

}  // namespace detail

// Which optional entries a table gets (each only where the group class supports it).
struct Optional {
  bool split = true;
  bool on_complete = true;
};

// The function table for Group: the operations in native_ops (1u << PG_OP_x; the core
// emulates the rest over send/recv), group_split and work_on_complete where Group and its
// works have them and optional allows. Every entry checks its handles and the op's
// struct_size and kind before Group sees them, and runs behind the firewall.
template <class Group>
constexpr pg_backend_ops_t make_ops(uint32_t native_ops = kAllOps, Optional optional = {}) {
  using E = detail::Entries<Group>;
  pg_backend_split_fn split = nullptr;
  if constexpr (requires(typename E::GroupPtr g, const pg_backend_group_config_t* c) {
                  g->split(int32_t{}, int32_t{}, c, &g);
                }) {
    if (optional.split) split = &E::group_split;
  }
  pg_backend_on_complete_fn on_complete = nullptr;
  if constexpr (requires(typename E::WorkRef w) {
                  {
                    w->notify_on_complete(pg_backend_work_done_fn{}, nullptr)
                    } -> std::same_as<bool>;
                }) {
    if (optional.on_complete) on_complete = &E::work_on_complete;
  }
  return pg_backend_ops_t{
      sizeof(pg_backend_ops_t),
      0,
      &E::group_create,
      &E::group_destroy,
      &E::group_abort,
      &E::work_test,
      &E::work_wait,
      &E::work_release,
      E::template op_entry<PG_OP_ALLREDUCE>(native_ops),
      E::template op_entry<PG_OP_BROADCAST>(native_ops),
      E::template op_entry<PG_OP_REDUCE>(native_ops),
      E::template op_entry<PG_OP_ALLGATHER>(native_ops),
      E::template op_entry<PG_OP_REDUCE_SCATTER>(native_ops),
      E::template op_entry<PG_OP_GATHER>(native_ops),
      E::template op_entry<PG_OP_SCATTER>(native_ops),
      E::template op_entry<PG_OP_ALLTOALL>(native_ops),
      E::template op_entry<PG_OP_BARRIER>(native_ops),
      E::template op_entry<PG_OP_SEND>(native_ops),
      E::template op_entry<PG_OP_RECV>(native_ops),
      split,
      on_complete,
  };
}

}  // namespace procgroup::kit
