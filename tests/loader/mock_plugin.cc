// A backend plugin for the loader's tests, written against procgroup_backend.h alone, as a
// third party would. One source, built as several MODULE variants by compile definitions
// (tests/loader/CMakeLists.txt), each broken in exactly one way:
//   MOCK_NO_SYMBOL          negotiate is renamed, so pg_backend_negotiate is not exported
//   MOCK_VERSION_TOO_NEW    accepts only interface versions 2..3 (answers ABI_MISMATCH)
//   MOCK_VERSION_TOO_OLD    answers version 0
//   MOCK_TABLE_TOO_SMALL    ops->struct_size stops before send/recv
//   MOCK_NULL_WORK_WAIT     required entry work_wait is NULL
//   MOCK_NEGOTIATE_ERROR    negotiate sets an error message and returns PG_ERR_UNSUPPORTED
//   MOCK_NEGOTIATE_THROWS   negotiate throws std::runtime_error
//   MOCK_THROWS_IN_CREATE   negotiates fine; group_create throws (for the core's firewall)
//   MOCK_P2P_ONLY           send and recv only, every collective NULL (valid: emulated)
// With none of them it is a good plugin: a world of one rank, where every collective copies
// input to output and every work completes at once. MOCK_NAME is the negotiated name.
#include <procgroup/procgroup_backend.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>

#define MOCK_STRINGIFY_INNER(x) #x
#define MOCK_STRINGIFY(x) MOCK_STRINGIFY_INNER(x)

namespace {

const char kName[] = MOCK_STRINGIFY(MOCK_NAME);

// Stays valid while we are loaded (procgroup_backend.h), so later entries may use it.
const pg_host_services_t* g_host = nullptr;

pg_status_t fail(pg_status_t status, const char* message) {
  if (g_host != nullptr && g_host->set_error != nullptr) g_host->set_error(g_host->ctx, message);
  return status;
}

struct MockGroup {
  std::atomic<bool> aborted{false};
};

struct MockWork {
  pg_status_t status;
};

[[maybe_unused]] size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32:
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_F64:
    case PG_DTYPE_I64: return 8;
    case PG_DTYPE_F16:
    case PG_DTYPE_BF16: return 2;
    case PG_DTYPE_I8:
    case PG_DTYPE_U8: return 1;
    default: return 0;
  }
}

pg_status_t group_create(const pg_backend_group_config_t* config, pg_backend_group_t* out) {
#if defined(MOCK_THROWS_IN_CREATE)
  (void)config;
  (void)out;
  throw std::runtime_error("mock: group_create threw on purpose");
#else
  if (config == nullptr || out == nullptr) return fail(PG_ERR_INVALID_ARGUMENT, "mock: NULL");
  if (config->size != 1) return fail(PG_ERR_UNSUPPORTED, "mock: only a world of one rank");
  auto* group = new (std::nothrow) MockGroup;
  if (group == nullptr) return fail(PG_ERR_OUT_OF_MEMORY, "mock: out of memory");
  *out = reinterpret_cast<pg_backend_group_t>(group);
  return PG_OK;
#endif
}

pg_status_t group_destroy(pg_backend_group_t group) {
  delete reinterpret_cast<MockGroup*>(group);
  return PG_OK;
}

pg_status_t group_abort(pg_backend_group_t group) {
  reinterpret_cast<MockGroup*>(group)->aborted = true;
  return PG_OK;
}

pg_status_t work_test(pg_backend_work_t work) { return reinterpret_cast<MockWork*>(work)->status; }

[[maybe_unused]] pg_status_t work_wait(pg_backend_work_t work, int64_t /*timeout_ms*/) {
  return reinterpret_cast<MockWork*>(work)->status;
}

void work_release(pg_backend_work_t work) { delete reinterpret_cast<MockWork*>(work); }

pg_status_t finish(pg_status_t status, pg_backend_work_t* work) {
  auto* w = new (std::nothrow) MockWork{status};
  if (w == nullptr) return fail(PG_ERR_OUT_OF_MEMORY, "mock: out of memory");
  *work = reinterpret_cast<pg_backend_work_t>(w);
  return PG_OK;
}

// On one rank every collective leaves the input in the output.
[[maybe_unused]] pg_status_t collective(pg_backend_group_t group, const pg_backend_op_t* op,
                                        pg_backend_work_t* work) {
  if (reinterpret_cast<MockGroup*>(group)->aborted) return finish(PG_ERR_ABORTED, work);
  const pg_buffer_t& in = op->input;
  const pg_buffer_t& out = op->output;
  if (in.data != nullptr && out.data != nullptr && in.data != out.data) {
    if (in.count != out.count || in.dtype != out.dtype) {
      return fail(PG_ERR_INVALID_ARGUMENT, "mock: input and output differ in count or dtype");
    }
    std::memcpy(out.data, in.data, in.count * dtype_size(in.dtype));
  }
  return finish(PG_OK, work);
}

pg_status_t point_to_point(pg_backend_group_t, const pg_backend_op_t*, pg_backend_work_t*) {
  return fail(PG_ERR_UNSUPPORTED, "mock: a world of one rank has no peer");
}

#if defined(MOCK_P2P_ONLY)
#define MOCK_COLLECTIVE nullptr
#else
#define MOCK_COLLECTIVE collective
#endif

#if defined(MOCK_NULL_WORK_WAIT)
#define MOCK_WORK_WAIT nullptr
#else
#define MOCK_WORK_WAIT work_wait
#endif

#if defined(MOCK_TABLE_TOO_SMALL)
// A table from before send/recv existed: too short for interface version 1.
constexpr uint32_t kOpsSize = offsetof(pg_backend_ops_t, send);
#else
constexpr uint32_t kOpsSize = sizeof(pg_backend_ops_t);
#endif

const pg_backend_ops_t kOps = {
    .struct_size = kOpsSize,
    .reserved0 = 0,
    .group_create = group_create,
    .group_destroy = group_destroy,
    .group_abort = group_abort,
    .work_test = work_test,
    .work_wait = MOCK_WORK_WAIT,
    .work_release = work_release,
    .allreduce = MOCK_COLLECTIVE,
    .broadcast = MOCK_COLLECTIVE,
    .reduce = MOCK_COLLECTIVE,
    .allgather = MOCK_COLLECTIVE,
    .reduce_scatter = MOCK_COLLECTIVE,
    .gather = MOCK_COLLECTIVE,
    .scatter = MOCK_COLLECTIVE,
    .alltoall = MOCK_COLLECTIVE,
    .barrier = MOCK_COLLECTIVE,
    .send = point_to_point,
    .recv = point_to_point,
    .group_split = nullptr,       // optional: subgroups come from group_create
    .work_on_complete = nullptr,  // optional: the core waits for works itself
};

#if defined(MOCK_VERSION_TOO_NEW)
constexpr uint32_t kMinVersion = 2;
constexpr uint32_t kMaxVersion = 3;
#else
constexpr uint32_t kMinVersion = 1;
constexpr uint32_t kMaxVersion = 1;
#endif

}  // namespace

#if defined(MOCK_NO_SYMBOL)
#define MOCK_NEGOTIATE mock_negotiate_renamed
extern "C" pg_status_t MOCK_NEGOTIATE(const pg_backend_negotiate_in_t* in,
                                      pg_backend_negotiate_out_t* out);
#else
#define MOCK_NEGOTIATE pg_backend_negotiate
#endif

extern "C" pg_status_t MOCK_NEGOTIATE(const pg_backend_negotiate_in_t* in,
                                      pg_backend_negotiate_out_t* out) {
  if (in == nullptr || out == nullptr || in->struct_size < sizeof(*in) ||
      out->struct_size < sizeof(*out) || in->host == nullptr) {
    return PG_ERR_INVALID_ARGUMENT;
  }
  g_host = in->host;
#if defined(MOCK_NEGOTIATE_THROWS)
  throw std::runtime_error("mock: negotiate threw on purpose");
#elif defined(MOCK_NEGOTIATE_ERROR)
  return fail(PG_ERR_UNSUPPORTED, "mock: no usable device on this host");
#endif
  if (in->min_version > kMaxVersion || in->max_version < kMinVersion) {
    char message[128];
    std::snprintf(message, sizeof(message), "mock: needs interface %u..%u, core offers %u..%u",
                  kMinVersion, kMaxVersion, in->min_version, in->max_version);
    return fail(PG_ERR_ABI_MISMATCH, message);
  }
#if defined(MOCK_VERSION_TOO_OLD)
  out->version = 0;
#else
  out->version = in->max_version < kMaxVersion ? in->max_version : kMaxVersion;
#endif
  out->name = kName;
  out->description = "loader test mock " MOCK_STRINGIFY(MOCK_NAME);
#if defined(MOCK_P2P_ONLY)
  out->native_ops = 1u << PG_OP_SEND | 1u << PG_OP_RECV;
#else
  out->native_ops = (1u << PG_OP_COUNT_) - 1;
#endif
  out->native_dtypes = 1u << PG_DTYPE_F32 | 1u << PG_DTYPE_F64;
  out->native_reduce_ops = 1u << PG_REDUCE_SUM;
  out->devices = 1u << PG_DEVICE_CPU;
  out->ops = &kOps;
  if (in->host->log != nullptr) in->host->log(in->host->ctx, PG_LOG_INFO, kName, "negotiated");
  return PG_OK;
}
