// nccl_group.h — one rank's membership in a group on the nccl backend: the communicator
// (created by create_communicator, nccl_rendezvous.cc) and the mapping of each procgroup
// operation onto NCCL on the communicator's internal stream.
//
//   std::unique_ptr<Group> group;
//   PG_KIT_TRY(Group::create(*config, host, &group));
//   std::shared_ptr<Work> work;
//   PG_KIT_TRY(group->submit(op, &work));   // returns at once; work->wait(...) later
//   Status st = group->shutdown();           // drains, finalizes, destroys
#ifndef PROCGROUP_BACKENDS_NCCL_NCCL_GROUP_H_
#define PROCGROUP_BACKENDS_NCCL_NCCL_GROUP_H_

#include <memory>

#include "nccl_comm.h"
#include "nccl_plan.h"
#include "nccl_status.h"
#include "nccl_work.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::nccl_backend {

// PROCGROUP_NCCL_BLOCKING=1: blocking NCCL communicators (ncclConfig_t.blocking = 1), whose
// operations launch without NCCL's non-blocking bookkeeping, at the price of an init or
// split that cannot be given up on when a rank never comes. Default 0 (non-blocking).
bool blocking_communicators();

// Rendezvous through config.store and ncclCommInitRankConfig (non-blocking), bounded by
// config.timeout_ms. No CUDA device: PG_ERR_UNSUPPORTED "no CUDA device: ...".
Status create_communicator(const pg_backend_group_config_t& config, const pg_host_services_t* host,
                           std::shared_ptr<Comm>* out);
// group_split with ncclCommSplit (nccl_split.cc), collective over every rank of parent:
// config NULL is PG_SPLIT_NO_COLOR (NCCL_SPLIT_NOCOLOR, *out stays empty). The child is on
// the parent's device with its own stream; NCCL's key is config->rank, the core's order.
Status split_communicator(Comm& parent, int32_t color, const pg_backend_group_config_t* config,
                          const pg_host_services_t* host, std::shared_ptr<Comm>* out);

// The kit (kit::make_ops) builds the plugin's table from this class.
class Group {
 public:
  static constexpr const char* kName = "nccl";
  static Status create(const pg_backend_group_config_t& config, const pg_host_services_t* host,
                       std::unique_ptr<Group>* out);
  // A child of this group (see split_communicator); *out stays empty for PG_SPLIT_NO_COLOR.
  // key is not used: the core's child rank (config->rank) already orders by it.
  Status split(int32_t color, int32_t key, const pg_backend_group_config_t* config,
               std::unique_ptr<Group>* out);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  // Checks op, orders it after its buffers' streams and enqueues it (send/recv are
  // deferred, see Comm::defer_p2p). Never waits for another rank.
  Status submit(const pg_backend_op_t& op, std::shared_ptr<Work>* out);
  void abort();
  // group_destroy: drains, finalizes, destroys.
  Status shutdown();

 private:
  Group(std::shared_ptr<Comm> comm, const pg_host_services_t* host)
      : comm_(std::move(comm)), host_(host) {}
  Status issue(const pg_backend_op_t& op, const Plan& plan, const std::shared_ptr<Work>& issued);

  std::shared_ptr<Comm> comm_;
  const pg_host_services_t* host_;
  bool destroyed_ = false;
};

}  // namespace procgroup::nccl_backend

#endif  // PROCGROUP_BACKENDS_NCCL_NCCL_GROUP_H_
