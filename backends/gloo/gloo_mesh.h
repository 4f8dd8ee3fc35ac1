// gloo_mesh.h — connects a group's full mesh of Gloo pairs through the host store, and
// names the rank at fault when that fails.
//
// Gloo's own connectFullMesh() reports "connect [10.0.0.7]:41234: Connection refused" or a
// store timeout without naming the rank it waited for, and returns once each socket is
// connected, even if the peer died a moment later. This does the same exchange one rank at
// a time (after every rank joined a counter in the store, so an absent peer costs nothing),
// so every failure names its rank, then checks each connection with a one-byte exchange, so
// a rank that died during the rendezvous fails group creation on every survivor.
//
//   auto context = std::make_shared<MeshContext>(rank, size);
//   context->setTimeout(timeout);
//   Status st = context->connect_mesh(kit::Store(config.store), device);  // or the rank at fault
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_MESH_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_MESH_H_

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <memory>

#include "gloo_plan.h"
#include "procgroup/backend_kit/store.hpp"

namespace procgroup::gloo_backend {

// The p2p slot of the connection check; reserved (p2p_tag_allowed refuses its tag).
inline constexpr uint64_t kMeshCheckSlot = ~uint64_t{0} - 2;

class MeshContext : public gloo::rendezvous::Context {
 public:
  MeshContext(int my_rank, int group_size) : gloo::rendezvous::Context(my_rank, group_size) {}

  // Blocks up to the context's timeout (1.5x at most, whatever the size). Failures:
  // PG_ERR_TIMEOUT (a rank did not join or answer), PG_ERR_PEER_LOST (a connection failed),
  // or the store's status. store is the group's (keys under "gloo/").
  Status connect_mesh(const kit::Store& store, std::shared_ptr<gloo::transport::Device>& device);

 private:
  struct Failures;
  Status await_ranks(const kit::Store& store, Clock::time_point deadline);
  Status missing_ranks(const kit::Store& store, int64_t joined);
  void check_connections(Failures& failures, Clock::time_point deadline);
};

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_MESH_H_
