// The suite's CUDA mode: the CUDA runtime through dlopen, and device mirrors of host
// buffers (see cuda_staging.h).
#include "cuda_staging.h"

#include <dlfcn.h>

#include <cstdlib>

#ifndef PG_CONFORMANCE_CUDART
#define PG_CONFORMANCE_CUDART "libcudart.so"
#endif

namespace pgtest {
namespace {

// The few runtime calls the staging needs (cudaError_t is an int-sized enum).
struct Cudart {
  int (*get_device_count)(int*) = nullptr;
  int (*set_device)(int) = nullptr;
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  const char* (*error_string)(int) = nullptr;
  std::string load_error;
};
constexpr int kHostToDevice = 1, kDeviceToHost = 2;

const Cudart& cudart() {
  static const Cudart api = [] {
    Cudart c;
    void* lib = nullptr;
    for (const char* name :
         {PG_CONFORMANCE_CUDART, "libcudart.so", "libcudart.so.13", "libcudart.so.12"}) {
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (lib == nullptr) {
      c.load_error = std::string("the CUDA runtime (libcudart) could not be loaded: ") + dlerror();
      return c;
    }
    auto sym = [lib](const char* name) { return dlsym(lib, name); };
    c.get_device_count = reinterpret_cast<int (*)(int*)>(sym("cudaGetDeviceCount"));
    c.set_device = reinterpret_cast<int (*)(int)>(sym("cudaSetDevice"));
    c.malloc = reinterpret_cast<int (*)(void**, size_t)>(sym("cudaMalloc"));
    c.free = reinterpret_cast<int (*)(void*)>(sym("cudaFree"));
    c.memcpy = reinterpret_cast<int (*)(void*, const void*, size_t, int)>(sym("cudaMemcpy"));
    c.error_string = reinterpret_cast<const char* (*)(int)>(sym("cudaGetErrorString"));
    if (!c.get_device_count || !c.set_device || !c.malloc || !c.free || !c.memcpy ||
        !c.error_string)
      c.load_error = "libcudart lacks a function the staging needs";
    return c;
  }();
  return api;
}

std::string error_text(int err) { return cudart().error_string(err); }

bool g_cuda_mode = false;  // written once in main() before any test thread exists

}  // namespace

void set_cuda_mode(bool on) { g_cuda_mode = on; }
bool cuda_mode() { return g_cuda_mode; }

int cuda_device_count(std::string* why) {
  const Cudart& c = cudart();
  if (!c.load_error.empty()) {
    *why = "no CUDA device: " + c.load_error;
    return 0;
  }
  int count = 0;
  const int err = c.get_device_count(&count);
  if (err != 0) {
    *why = "no CUDA device: cudaGetDeviceCount failed: " + error_text(err);
    return 0;
  }
  if (count == 0) *why = "no CUDA device: cudaGetDeviceCount found 0 devices";
  return count;
}

int cuda_device_for_rank() {
  const char* local = std::getenv("LOCAL_RANK");
  return local != nullptr ? std::atoi(local) : 0;
}

DeviceMirror::DeviceMirror(void* host, size_t bytes, int device)
    : host_(static_cast<char*>(host)), bytes_(bytes), device_(device) {
  const Cudart& c = cudart();
  if (!c.load_error.empty()) {
    error_ = c.load_error;
    return;
  }
  int err = c.set_device(device_);
  if (err == 0) err = c.malloc(&device_ptr_, bytes_ > 0 ? bytes_ : 1);
  if (err == 0) err = c.memcpy(device_ptr_, host_, bytes_, kHostToDevice);
  if (err != 0) error_ = "staging on cuda:" + std::to_string(device_) + ": " + error_text(err);
}

DeviceMirror::~DeviceMirror() {
  if (device_ptr_ != nullptr) (void)cudart().free(device_ptr_);
}

bool DeviceMirror::contains(const void* p) const {
  const char* c = static_cast<const char*>(p);
  return c >= host_ && c < host_ + bytes_;
}

void* DeviceMirror::translate(const void* p) const {
  return static_cast<char*>(device_ptr_) + (static_cast<const char*>(p) - host_);
}

bool DeviceMirror::download() {
  const int err = cudart().memcpy(host_, device_ptr_, bytes_, kDeviceToHost);
  if (err != 0)
    error_ = "copying back from cuda:" + std::to_string(device_) + ": " + error_text(err);
  return err == 0;
}

}  // namespace pgtest
