#include "host_collective.h"

namespace procgroup::ddp::detail {
namespace {

size_t bytes_of(const pg_buffer_t& b) { return b.count * element_size(b.dtype); }

}  // namespace

bool backend_has_cpu(const Group& group) {
  return (group.capabilities().devices >> PG_DEVICE_CPU) & 1u;
}

void run_host_collective(const Group& group, Group::CFn fn, const pg_buffer_t* input,
                         const pg_buffer_t& output, const pg_op_options_t& options,
                         const Exec& via) {
  if (via.on_cpu() || backend_has_cpu(group)) {
    group.run(fn, input, &output, options).wait();
    return;
  }
  // Through via's device: the collective is ordered after the uploads on via.stream, and
  // once wait() returns its result is visible to every stream (the plugin's contract).
  DeviceMemory out_mem(via, bytes_of(output));
  from_host(via, out_mem.data(), output.data, bytes_of(output));
  pg_buffer_t out = output;
  out.data = out_mem.data();
  out.device_type = via.device.type;
  out.device_index = via.device.index;
  out.stream = via.stream;
  DeviceMemory in_mem;
  pg_buffer_t in{};
  if (input != nullptr) {
    in = out;
    in.count = input->count;
    in.dtype = input->dtype;
    if (input->data != output.data) {
      in_mem = DeviceMemory(via, bytes_of(*input));
      from_host(via, in_mem.data(), input->data, bytes_of(*input));
      in.data = in_mem.data();
    }
  }
  group.run(fn, input != nullptr ? &in : nullptr, &out, options).wait();
  to_host(via, output.data, out_mem.data(), bytes_of(output));
}

}  // namespace procgroup::ddp::detail
