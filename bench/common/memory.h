// memory.h — where the benchmark's buffers live and what times a loop, so one runner serves
// host buffers (the default: aligned host memory, a steady clock) and device buffers (a
// tool's own Memory, e.g. cudaMalloc, and an Engine's own Timer, e.g. CUDA events on the
// stream its operations are ordered on). The runner fills and checks on the host and moves
// the data with to_device/to_host; nothing here knows CUDA.
//
//   CudaMemory memory(device);                    // a tool's implementation
//   run_benchmark(info, comm, engine, direct, &memory);
#pragma once

#include <cstdint>
#include <string>

namespace procgroup::bench {

class Memory {
 public:
  virtual ~Memory() = default;
  // "host", "cuda:0", ...: printed in the header.
  virtual std::string name() const = 0;
  // At least bytes (one byte when 0), zeroed. Throws std::exception on failure.
  virtual void* allocate(uint64_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  // Complete on return.
  virtual void to_device(void* dst, const void* host_src, uint64_t bytes) = 0;
  virtual void to_host(void* host_dst, const void* src, uint64_t bytes) = 0;
};

// Times one loop of -n operations: start() after the barrier, stop_us() once the engine's
// run() has returned; the microseconds between, as the operations' stream saw them.
class Timer {
 public:
  virtual ~Timer() = default;
  virtual void start() = 0;
  virtual double stop_us() = 0;
};

}  // namespace procgroup::bench
