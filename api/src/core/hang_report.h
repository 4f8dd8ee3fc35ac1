// Hang forensics, run once per group at its first timeout. This rank's flight record goes
// to the log (stderr) and, if PROCGROUP_TRACE_DIR is set, to a file there; its state goes
// to the store; and the lowest rank that reported prints one summary naming who is
// behind ("ranks 0-2 are in allreduce #42 (...); rank 3 did not report ..."), while every
// reporting rank learns who it did not hear from, for its own error message. Store
// access uses its own short-timeout connection, so a dead store host costs at most a
// couple of seconds, never another group timeout.
#pragma once

#include <memory>
#include <string>

#include "core/flight_recorder.h"
#include "store/store.h"

namespace procgroup::detail {

struct HangContext {
  std::string group_id;
  int rank = 0;
  int size = 1;
  StoreConfig store;                  // how to reach the job's store (url, token)
  std::shared_ptr<Store> user_store;  // the caller's store, used as it is when set
  std::string trace_dir;              // empty: no file
};

struct HangFindings {
  std::string summary;  // the summary line when this rank printed it (for tests), else ""
  // For this rank's own error message: the ranks it did not hear from or that are elsewhere
  // ("not heard from: rank 3 (stuck, stopped or gone)"); "" when nothing could be learned.
  std::string behind;
  // Every rank is inside the same operation number, with different arguments.
  bool mismatch = false;
};

HangFindings report_hang(const HangContext& context, const FlightRecorder& recorder);

// Only this rank's state to the store, for a peer's report: no log, no waiting. For a rank
// whose first failure is a lost peer, which may be a peer that timed out first (Gloo
// closes a timed-out rank's connections, so the others see a lost peer before their own
// timeout, and that peer's report would otherwise never hear from them).
void publish_hang_state(const HangContext& context, const FlightRecorder& recorder);

// "0-2, 5": ranks as ranges; after 8 ranges, "... and 37 more", so a message stays short
// at any world size.
std::string format_ranks(const std::vector<int>& sorted_ranks);
// "rank 3", "ranks 0-1", "ranks 1-999 (999)": format_ranks with the count from three up.
std::string rank_list(const std::vector<int>& sorted_ranks);

}  // namespace procgroup::detail
