// cuda_staging.h — the suite's CUDA mode (`conformance_test --device cuda`): every
// collective case lays out its buffers on the host as usual (guards, poison, in-place
// forms), then copies them whole, guards included, into device memory, runs on the device
// copies and copies them back before checking. The CUDA runtime is loaded with dlopen, so
// the suite builds and runs without CUDA; CUDA mode then reports why it cannot run.
//
//   if (cuda_mode()) { DeviceMirror m(host_bytes, size, cuda_device_for_rank()); ... }
#pragma once

#include <cstddef>
#include <string>

namespace pgtest {

// The process-wide mode, set once in main() before any test runs (the flag, or
// PGCONF_DEVICE=cuda in rank processes).
void set_cuda_mode(bool on);
bool cuda_mode();

// The number of CUDA devices; 0 with *why = "no CUDA device: ..." when none can be used.
int cuda_device_count(std::string* why);
// This rank process's device: LOCAL_RANK (one device per rank, as NCCL needs).
int cuda_device_for_rank();

// A device copy of host bytes [host, host + bytes) on one device.
class DeviceMirror {
 public:
  DeviceMirror(void* host, size_t bytes, int device);
  ~DeviceMirror();
  DeviceMirror(const DeviceMirror&) = delete;
  DeviceMirror& operator=(const DeviceMirror&) = delete;
  const std::string& error() const { return error_; }  // "" when allocated and uploaded
  bool contains(const void* host_ptr) const;
  void* translate(const void* host_ptr) const;  // the device address of a host address
  bool download();                              // device bytes back into the host bytes

 private:
  char* host_;
  size_t bytes_;
  int device_;
  void* device_ptr_ = nullptr;
  std::string error_;
};

}  // namespace pgtest
