// Communicator creation: device choice, the ncclUniqueId exchange through the host store,
// and non-blocking ncclCommInitRankConfig bounded by the group timeout (see nccl_group.h).
//
// Store keys (the store is private to the group): "nccl/uid" from rank 0 ('U' + the id, or
// 'E' + rank 0's error, so the others fail at once too), "nccl/joined/<rank>" before init
// (to name the ranks missing at a timeout) and "nccl/failed" from any rank that gave up.
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "nccl_comm.h"
#include "nccl_cuda.h"
#include "nccl_group.h"
#include "procgroup/backend_kit/store.hpp"

namespace procgroup::nccl_backend {
namespace {

constexpr char kUidKey[] = "nccl/uid";
constexpr char kFailedKey[] = "nccl/failed";
constexpr auto kFailedPollInterval = std::chrono::milliseconds(250);

// Tells the other ranks this one gave up, so they need not wait out the timeout.
Status give_up(const pg_backend_group_config_t& c, Status st) {
  const kit::Store store(c.store);  // best effort: the others time out otherwise
  const std::string text = "rank " + std::to_string(c.rank) + ": " + st.message;
  if (c.rank == 0) (void)store.set(kUidKey, "E" + text);
  (void)store.set(kFailedKey, text);
  return st;
}

Status choose_device(const pg_backend_group_config_t& c, int count, int* device) {
  const char* env = std::getenv("PROCGROUP_NCCL_DEVICE");
  if (env != nullptr && env[0] != '\0') {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || v < 0 || v >= count) {
      return nccl_error(PG_ERR_CONFIG, "PROCGROUP_NCCL_DEVICE='" + std::string(env) +
                                           "' is not a device index below " +
                                           std::to_string(count));
    }
    *device = static_cast<int>(v);
    return {};
  }
  const int local = c.local_rank > 0 ? c.local_rank : 0;
  if (local >= count) {
    return nccl_error(PG_ERR_CONFIG,
                      "LOCAL_RANK " + std::to_string(local) + " has no CUDA device of its own (" +
                          std::to_string(count) +
                          " on this host; NCCL needs one device per rank): start at most " +
                          std::to_string(count) + " ranks per host or set PROCGROUP_NCCL_DEVICE");
  }
  *device = local;
  return {};
}

Status exchange_id(const pg_backend_group_config_t& c, ncclUniqueId* id) {
  if (c.rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess) {
      return nccl_error(nccl_code(r),
                        "group_create: ncclGetUniqueId: " + nccl_error_text(r, nullptr));
    }
    (void)kit::Store(c.store).set(kUidKey, "U" + std::string(id->internal, sizeof(id->internal)));
    return {};
  }
  std::string value;
  if (!kit::Store(c.store).get(kUidKey, c.timeout_ms, &value).ok()) {
    return nccl_error(PG_ERR_TIMEOUT,
                      "group_create: rank 0 did not publish NCCL's unique id "
                      "within " +
                          std::to_string(c.timeout_ms) + " ms");
  }
  if (value.size() > 1 && value[0] == 'E') {
    return nccl_error(PG_ERR_BACKEND, "group_create: " + value.substr(1));
  }
  if (value.size() != 1 + sizeof(id->internal) || value[0] != 'U') {
    return nccl_error(PG_ERR_BACKEND, "group_create: malformed unique id in the store");
  }
  std::memcpy(id->internal, value.data() + 1, sizeof(id->internal));
  return {};
}

std::string missing_ranks(const pg_backend_group_config_t& c) {
  std::string list;
  int named = 0, more = 0;
  const kit::Store store(c.store);
  std::string ignored;
  for (int r = 0; r < c.size; ++r) {
    if (store.get("nccl/joined/" + std::to_string(r), 0, &ignored).ok()) continue;
    if (named++ < 16) {
      list += (list.empty() ? "" : ", ") + std::to_string(r);
    } else {
      ++more;
    }
  }
  if (list.empty()) return "every rank reached ncclCommInitRankConfig";
  if (more > 0) list += " and " + std::to_string(more) + " more";
  return "rank(s) " + list + " never reached ncclCommInitRankConfig";
}

// Polls a non-blocking init until it is done, a rank gives up, or the deadline passes.
Status finish_init(const pg_backend_group_config_t& c, ncclComm_t comm, ncclResult_t r,
                   Clock::time_point deadline) {
  Clock::time_point next_store_look = Clock::now() + kFailedPollInterval;
  return await_nccl(
      comm, r, "group_create: ncclCommInitRankConfig", deadline,
      [&]() -> std::optional<Status> {
        if (Clock::now() <= next_store_look) return std::nullopt;
        next_store_look = Clock::now() + kFailedPollInterval;
        std::string failed;
        if (!kit::Store(c.store).get(kFailedKey, 0, &failed).ok()) return std::nullopt;
        return nccl_error(PG_ERR_BACKEND, "group_create: " + failed);
      },
      [&] {
        return nccl_error(PG_ERR_TIMEOUT,
                          "group_create: ncclCommInitRankConfig did not finish within " +
                              std::to_string(c.timeout_ms) + " ms (" + missing_ranks(c) + ")");
      });
}

}  // namespace

bool blocking_communicators() {
  const char* env = std::getenv("PROCGROUP_NCCL_BLOCKING");
  return env != nullptr && std::string(env) == "1";
}

Status create_communicator(const pg_backend_group_config_t& c, const pg_host_services_t* host,
                           std::shared_ptr<Comm>* out) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(c.timeout_ms);
  int count = 0, device = 0;
  Status st = count_devices(&count);
  if (st.ok()) st = choose_device(c, count, &device);
  if (!st.ok()) return give_up(c, st);
  DeviceGuard on(device);
  if (!on.status().ok()) return give_up(c, on.status());
  auto comm = std::make_shared<Comm>(c.rank, c.size, device, c.timeout_ms,
                                     std::string(c.group_id != nullptr ? c.group_id : ""));
  st = comm->create_resources();
  ncclUniqueId id{};
  if (st.ok()) st = exchange_id(c, &id);
  if (!st.ok()) return give_up(c, st);

  (void)kit::Store(c.store).set("nccl/joined/" + std::to_string(c.rank), "1");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Non-blocking: init returns at once, so a rank that never comes can be given up on.
  config.blocking = blocking_communicators() ? 1 : 0;
  config.commName = comm->name().c_str();
  ncclComm_t nccl = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&nccl, c.size, id, c.rank, &config);
  st = nccl == nullptr && r != ncclSuccess
           ? nccl_error(nccl_code(r),
                        "group_create: ncclCommInitRankConfig: " + nccl_error_text(r, nullptr))
           : finish_init(c, nccl, r, deadline);
  if (!st.ok()) {
    if (nccl != nullptr) (void)ncclCommAbort(nccl);
    return give_up(c, st);
  }
  comm->adopt(nccl);
  if (host != nullptr && host->log != nullptr) {
    const std::string line = "rank " + std::to_string(c.rank) + "/" + std::to_string(c.size) +
                             " of group '" + comm->name() + "' on cuda:" + std::to_string(device);
    host->log(host->ctx, PG_LOG_INFO, "nccl", line.c_str());
  }
  *out = std::move(comm);
  return {};
}

}  // namespace procgroup::nccl_backend
