// Runs the ranks of one node to completion: starts them (spawn.h), copies their output through
// LinePrefixer, and supervises them in one poll loop over their pipes and a SignalFd.
//
// Policy (the --help text tells users the same):
// - a rank that exits non-zero or dies of a signal is reported in one line, the other ranks'
//   process groups get SIGTERM, and SIGKILL after options.kill_grace_s;
// - SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to pgrun go to every rank's process group the same way;
//   a second one while ranks are stopping sends SIGKILL at once;
// - the FIRST failing rank decides the exit code (128+N for a death by signal N); 127/126 when
//   PROGRAM cannot be executed; 1 when the node's limits cannot hold the ranks (resources.h,
//   checked before the first one starts); 0 when every rank exits 0;
// - if pgrun dies, even of SIGKILL, the kernel kills the ranks (spawn.h).
//
//   int code = launch(options, master_port);
#pragma once

#include "options.h"

namespace procgroup::pgrun {

// Returns pgrun's exit code. Throws std::system_error only when supervision itself cannot work
// (no signalfd, poll failing), after stopping any ranks it started.
int launch(const Options& options, int master_port);

}  // namespace procgroup::pgrun
