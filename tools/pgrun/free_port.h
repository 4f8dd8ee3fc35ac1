// Picks a TCP port for MASTER_PORT on a single-node run: the kernel chooses a free port for a
// socket bound to 127.0.0.1:0, and the socket is closed again so rank 0 can bind it. Another
// process could take the port in between; that window is the one torchrun --standalone has too.
//
//   FreePort port = pick_free_port();
//   if (port.port == 0) fail(port.error);
#pragma once

#include <string>

namespace procgroup::pgrun {

struct FreePort {
  int port = 0;       // 0 when none could be picked
  std::string error;  // why, when port is 0
};

FreePort pick_free_port();

}  // namespace procgroup::pgrun
