// gloo_net.h — which local address the gloo TCP device listens on, and SIGPIPE safety.
//
// PROCGROUP_SOCKET_IFNAME names an interface; otherwise the device binds the local
// address that routes to master_addr (127.0.0.1 when the master is loopback, or when no
// master is given), so every rank listens where the others can reach it:
//
//   NetChoice net;
//   Status st = choose_interface(config->master_addr, &net);
//   auto device = gloo::transport::tcp::CreateDevice(net.attr);
#ifndef PROCGROUP_BACKENDS_GLOO_GLOO_NET_H_
#define PROCGROUP_BACKENDS_GLOO_GLOO_NET_H_

#include <gloo/transport/tcp/attr.h>
#include <signal.h>

#include <string>

#include "gloo_ops.h"

namespace procgroup::gloo_backend {

struct NetChoice {
  gloo::transport::tcp::attr attr;
  std::string description;  // for logs: "interface eth0", "address 10.0.0.5", ...
};

// PG_ERR_CONFIG when the master address cannot be resolved or routed to.
Status choose_interface(const char* master_addr, NetChoice* out);

// Gloo writes to its sockets with writev(), so a write to a dead peer raises SIGPIPE, which
// would kill the process. Gloo's threads and ours block it; threads inherit the mask of
// the thread that starts them.

// Blocks SIGPIPE on this thread for the scope; a SIGPIPE raised meanwhile is consumed.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock();
  ~ScopedSigpipeBlock();
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
};

// For threads the backend owns: SIGPIPE stays blocked for the thread's life.
void block_sigpipe_forever();

}  // namespace procgroup::gloo_backend

#endif  // PROCGROUP_BACKENDS_GLOO_GLOO_NET_H_
