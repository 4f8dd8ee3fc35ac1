// Hostile clients for the store tests: while a real job rendezvouses and runs collectives,
// threads keep hitting its store with garbage, truncated frames, huge lengths, slow
// (slowloris) frames, wrong-token authentication and bursts of idle connections.
//
//   StoreFlood flood("127.0.0.1", port, 4);   // starts at once, retries until the store is up
//   ... run the job ...
//   flood.rejected();                         // hostile frames answered so far
//   StoreFlood::Counts c = flood.stop();      // how much hostility was delivered
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace procgroup::testing {

class StoreFlood {
 public:
  StoreFlood(std::string host, int port, int threads);
  ~StoreFlood();
  StoreFlood(const StoreFlood&) = delete;
  StoreFlood& operator=(const StoreFlood&) = delete;

  struct Counts {
    uint64_t connections = 0;  // accepted by the store
    uint64_t rejected = 0;     // closed by the store with an ERROR first
  };
  Counts stop();
  uint64_t rejected() const { return rejected_.load(); }  // so far

 private:
  void attack(int kind);
  int open_connection();  // -1 while the store is not up
  std::string host_;
  int port_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> rejected_{0};
  std::vector<std::thread> threads_;
};

}  // namespace procgroup::testing
