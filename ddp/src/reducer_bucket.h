// reducer_bucket.h — one bucket of the Reducer: its layout, its flat gradient storage (on
// the parameters' device) and the reduction in flight. Internal to ddp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "device.h"
#include "procgroup/ddp/comm_hook.h"
#include "procgroup/ddp/reducer.h"

namespace procgroup::ddp {

struct Reducer::Bucket {
  BucketSpec spec;
  detail::DeviceMemory storage;  // spec.bytes, 8-byte aligned, zero-initialised
  size_t pending = 0;            // gradients not yet ready in this pass
  std::unique_ptr<HookWork> work;

  void* at(uint64_t offset) {
    return static_cast<unsigned char*>(storage.data()) + offset * element_size(spec.dtype);
  }
  TensorRef view() { return {storage.data(), spec.numel, spec.dtype, spec.device}; }
};

}  // namespace procgroup::ddp
