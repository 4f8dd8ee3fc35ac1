// A test-only backend: loads the plugin at PGCONF_MASK_INNER (a path) and declares only
// part of its capabilities, the masks ANDed with PGCONF_MASK_OPS, PGCONF_MASK_DTYPES and
// PGCONF_MASK_REDUCE_OPS (hexadecimal; unset: keep all). The core then emulates the hidden
// rest over the inner plugin's send/recv, so the conformance suite can test the core's
// emulation in real processes on a backend that runs everything natively.
// PGCONF_MASK_DEVICE_ONLY=1 makes it a stand-in for a device-only backend such as nccl
// without a GPU: it declares CUDA buffers only and hands them to the inner plugin as CPU
// buffers (the "device memory" is host memory), so the core's handling of backends that
// take no CPU buffers (split, barrier, debug fingerprints through the store) can be tested
// anywhere.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "procgroup/procgroup_backend.h"

namespace {

uint32_t mask_from_env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? static_cast<uint32_t>(std::strtoul(value, nullptr, 16)) : ~0u;
}

// The inner plugin stays loaded as long as this one: the core uses its function table.
class InnerPlugin {
 public:
  explicit InnerPlugin(const char* path)
      : handle_(path != nullptr ? ::dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr),
        error_(handle_ == nullptr ? (path == nullptr ? "PGCONF_MASK_INNER is not set"
                                                     : std::string(path) + ": " + ::dlerror())
                                  : "") {}
  ~InnerPlugin() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  InnerPlugin(const InnerPlugin&) = delete;
  InnerPlugin& operator=(const InnerPlugin&) = delete;

  pg_backend_negotiate_fn negotiate() const {
    return handle_ == nullptr ? nullptr
                              : reinterpret_cast<pg_backend_negotiate_fn>(
                                    ::dlsym(handle_, PG_BACKEND_NEGOTIATE_SYMBOL));
  }
  const std::string& error() const { return error_; }

 private:
  void* handle_;
  std::string error_;
};

pg_buffer_t as_cpu(pg_buffer_t b) {
  if (b.device_type == PG_DEVICE_CUDA) b.device_type = PG_DEVICE_CPU;
  return b;
}

pg_backend_op_fn* entry(pg_backend_ops_t& t, int32_t op) {
  switch (op) {
    case PG_OP_ALLREDUCE: return &t.allreduce;
    case PG_OP_BROADCAST: return &t.broadcast;
    case PG_OP_REDUCE: return &t.reduce;
    case PG_OP_ALLGATHER: return &t.allgather;
    case PG_OP_REDUCE_SCATTER: return &t.reduce_scatter;
    case PG_OP_GATHER: return &t.gather;
    case PG_OP_SCATTER: return &t.scatter;
    case PG_OP_ALLTOALL: return &t.alltoall;
    case PG_OP_BARRIER: return &t.barrier;
    case PG_OP_SEND: return &t.send;
    case PG_OP_RECV: return &t.recv;
    default: return nullptr;
  }
}

pg_backend_ops_t g_inner_table{};  // the inner plugin's table, copied once
const pg_host_services_t* g_host = nullptr;

bool on_cpu(const pg_buffer_t& b) { return b.device_type == PG_DEVICE_CPU && b.count > 0; }

// Every operation has this signature, and op->op says which it is.
pg_status_t device_only_op(pg_backend_group_t group, const pg_backend_op_t* op,
                           pg_backend_work_t* work) {
  // Like nccl: host memory is refused even where the core bypasses its own device check.
  if (op->op != PG_OP_BARRIER && (on_cpu(op->input) || on_cpu(op->output))) {
    g_host->set_error(g_host->ctx, "device-only mask plugin: a CPU buffer was passed");
    return PG_ERR_UNSUPPORTED;
  }
  pg_backend_op_t cpu = *op;
  cpu.input = as_cpu(op->input);
  cpu.output = as_cpu(op->output);
  return (*entry(g_inner_table, op->op))(group, &cpu, work);
}

const pg_backend_ops_t* device_only_table(const pg_backend_ops_t* inner) {
  static const pg_backend_ops_t table = [inner] {
    // Only what the inner table's struct_size covers: a version-1 table ends at recv.
    std::memcpy(&g_inner_table, inner, std::min<size_t>(inner->struct_size, sizeof(g_inner_table)));
    pg_backend_ops_t t = g_inner_table;
    for (int32_t op = PG_OP_ALLREDUCE; op <= PG_OP_RECV; ++op)
      if (*entry(t, op) != nullptr) *entry(t, op) = device_only_op;
    return t;
  }();
  return &table;
}

}  // namespace

extern "C" PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                              pg_backend_negotiate_out_t* out) {
  static const InnerPlugin inner(std::getenv("PGCONF_MASK_INNER"));  // loaded once
  const pg_backend_negotiate_fn negotiate = inner.negotiate();
  if (negotiate == nullptr) {
    const std::string message = "conformance mask plugin: cannot load the inner plugin: " +
                                (inner.error().empty() ? "no pg_backend_negotiate" : inner.error());
    if (in != nullptr && in->host != nullptr) in->host->set_error(in->host->ctx, message.c_str());
    return PG_ERR_BACKEND_NOT_FOUND;
  }
  const pg_status_t status = negotiate(in, out);
  if (status != PG_OK) return status;
  out->native_ops &= mask_from_env("PGCONF_MASK_OPS");
  out->native_dtypes &= mask_from_env("PGCONF_MASK_DTYPES");
  out->native_reduce_ops &= mask_from_env("PGCONF_MASK_REDUCE_OPS");
  const char* device_only = std::getenv("PGCONF_MASK_DEVICE_ONLY");
  if (device_only != nullptr && std::string(device_only) == "1") {
    out->devices = 1u << PG_DEVICE_CUDA;
    g_host = in->host;
    out->ops = device_only_table(out->ops);
  }
  return PG_OK;
}
