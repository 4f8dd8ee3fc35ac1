/* procgroup_backend.h — the procgroup backend plugin ABI, interface version 1.
 *
 * A backend is a shared library that exports exactly one symbol, pg_backend_negotiate.
 * libprocgroup calls it once after dlopen with the range of interface versions it speaks
 * and its host services; the plugin answers with the version it chose, its name, its
 * capability masks and a const function table. This header is self-contained (C11 or C++,
 * nothing but <stdint.h>/<stddef.h>): copy it into your own tree to write a plugin.
 *
 *   static const pg_backend_ops_t kOps = {sizeof(pg_backend_ops_t), my_create, ...};
 *   PG_BACKEND_EXPORT int32_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
 *                                                 pg_backend_negotiate_out_t* out) {
 *     if (in->min_version > 1 || in->max_version < 1) return PG_ERR_ABI_MISMATCH;
 *     out->version = 1; out->name = "mine"; out->ops = &kOps;
 *     out->native_ops = 1u << PG_OP_SEND | 1u << PG_OP_RECV;  // the core builds the rest
 *     out->native_dtypes = ~0u; out->native_reduce_ops = ~0u;
 *     out->devices = 1u << PG_DEVICE_CPU;
 *     return PG_OK;
 *   }
 *
 * Contract (docs/backend-interface.md has the full policy table):
 * - Every entry returns a pg_status_t. Before returning an error, call
 *   host->set_error(host->ctx, "message") on the same thread; the user sees that message.
 * - Nothing may throw or abort across this boundary.
 * - A NULL entry for an operation (or a missing capability bit) means "not native": the
 *   core emulates it over send/recv, so a plugin with only send and recv is complete.
 * - Operations are issued in the same order on every rank. send/recv are matched by
 *   (peer, tag) in issue order; tags are 64-bit and the core reserves tags >= 2^62 for
 *   its own algorithms.
 * - A work completes exactly once. work_test/work_wait report PG_OK, PG_PENDING or the
 *   error; work_release may be called on a pending work (the backend finishes it alone).
 */
#ifndef PROCGROUP_PROCGROUP_BACKEND_H_
#define PROCGROUP_PROCGROUP_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define PG_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define PG_BACKEND_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define PG_BACKEND_INTERFACE_VERSION 1u

/* ---- Types shared, byte for byte, with procgroup.h ----------------------------- */
#ifndef PG_COMMON_TYPES_V1
#define PG_COMMON_TYPES_V1

typedef int32_t pg_status_t;
enum {
  PG_OK = 0,
  PG_PENDING = 1,                /* not an error: the work has not completed yet */
  PG_ERR_INVALID_ARGUMENT = 2,   /* a NULL pointer, bad size, dtype, rank, ... */
  PG_ERR_UNSUPPORTED = 3,        /* the backend cannot do this (e.g. CUDA buffers on gloo) */
  PG_ERR_TIMEOUT = 4,            /* the group timeout passed; the group is aborted */
  PG_ERR_PEER_LOST = 5,          /* a rank died or its connection broke */
  PG_ERR_ABORTED = 6,            /* the group was aborted earlier (by the user or a failure) */
  PG_ERR_MISMATCH = 7,           /* ranks called different collectives or sizes */
  PG_ERR_BACKEND_NOT_FOUND = 8,  /* no plugin of that name or path could be loaded */
  PG_ERR_ABI_MISMATCH = 9,       /* the plugin speaks an interface version we do not */
  PG_ERR_BACKEND = 10,           /* the backend reported an internal failure */
  PG_ERR_STORE = 11,             /* rendezvous store unreachable, port in use, bad reply */
  PG_ERR_AUTH = 12,              /* store authentication failed */
  PG_ERR_OUT_OF_MEMORY = 13,
  PG_ERR_CONFIG = 14,            /* missing or malformed environment / configuration */
  PG_ERR_INTERNAL = 15           /* a bug in procgroup; please report it */
};

typedef int32_t pg_dtype_t;
enum {
  PG_DTYPE_INVALID = 0, /* zero is never a valid dtype, so a forgotten field is caught */
  PG_DTYPE_F32 = 1,
  PG_DTYPE_F64 = 2,
  PG_DTYPE_F16 = 3,
  PG_DTYPE_BF16 = 4,
  PG_DTYPE_I8 = 5,
  PG_DTYPE_U8 = 6,
  PG_DTYPE_I32 = 7,
  PG_DTYPE_I64 = 8,
  PG_DTYPE_COUNT_ = 9
};

typedef int32_t pg_reduce_op_t;
enum {
  PG_REDUCE_SUM = 0,
  PG_REDUCE_AVG = 1,
  PG_REDUCE_PROD = 2,
  PG_REDUCE_MIN = 3,
  PG_REDUCE_MAX = 4,
  PG_REDUCE_COUNT_ = 5
};

typedef int32_t pg_device_type_t;
enum { PG_DEVICE_CPU = 0, PG_DEVICE_CUDA = 1, PG_DEVICE_COUNT_ = 2 };

typedef int32_t pg_op_t;
enum {
  PG_OP_ALLREDUCE = 0,
  PG_OP_BROADCAST = 1,
  PG_OP_REDUCE = 2,
  PG_OP_ALLGATHER = 3,
  PG_OP_REDUCE_SCATTER = 4,
  PG_OP_GATHER = 5,
  PG_OP_SCATTER = 6,
  PG_OP_ALLTOALL = 7,
  PG_OP_BARRIER = 8,
  PG_OP_SEND = 9,
  PG_OP_RECV = 10,
  PG_OP_COUNT_ = 11
};

/* A contiguous buffer. count is in elements of dtype. stream is a cudaStream_t for CUDA
 * buffers (NULL: the default stream) and ignored for CPU buffers. */
typedef struct pg_buffer {
  uint32_t struct_size;
  int32_t dtype;        /* pg_dtype_t */
  void* data;
  uint64_t count;
  int32_t device_type;  /* pg_device_type_t */
  int32_t device_index;
  void* stream;
} pg_buffer_t;

#endif /* PG_COMMON_TYPES_V1 */

/* ---- Host services (supplied by libprocgroup) ---------------------------------- */

enum { PG_LOG_ERROR = 0, PG_LOG_WARN = 1, PG_LOG_INFO = 2, PG_LOG_DEBUG = 3 };

/* Tags at or above this value belong to the core's own algorithms. */
#define PG_BACKEND_RESERVED_TAG_BASE (((uint64_t)1) << 62)

typedef struct pg_host_services {
  uint32_t struct_size;
  uint32_t reserved0;
  void* ctx;
  /* Writes a line to the procgroup log (PROCGROUP_LOG_LEVEL filters it). */
  void (*log)(void* ctx, int32_t level, const char* backend_name, const char* message);
  /* Sets this thread's error message; call before returning a non-OK status. */
  void (*set_error)(void* ctx, const char* message);
  /* inout[i] = inout[i] (op) in[i] for CPU memory, every dtype, vectorised; op is SUM,
   * PROD, MIN or MAX (AVG: sum here, then scale). For plugins that want the core's kernels. */
  pg_status_t (*reduce)(void* ctx, void* inout, const void* in, uint64_t count,
                        pg_dtype_t dtype, pg_reduce_op_t op);
  /* data[i] *= 1/divisor for floating dtypes, integer division otherwise (AVG's last step). */
  pg_status_t (*scale_down)(void* ctx, void* data, uint64_t count, pg_dtype_t dtype,
                            uint64_t divisor);
  /* Appended to version 1, absent from a table shorter than PG_HOST_SERVICES_REDUCE_TO_SIZE
   * (an older core: use reduce): out[i] = a[i] (op) b[i], the same kernels as reduce. out
   * may be a or b but must not overlap them otherwise. Saves the copy an out-of-place
   * reduction needs, and keeps a as the left operand, which min/max ties (+0, -0) and NaN
   * payloads depend on: ranks that combine in the same order get identical bits. */
  pg_status_t (*reduce_to)(void* ctx, void* out, const void* a, const void* b, uint64_t count,
                           pg_dtype_t dtype, pg_reduce_op_t op);
} pg_host_services_t;

/* A host services table at least this large has the reduce_to entry. */
#define PG_HOST_SERVICES_REDUCE_TO_SIZE \
  (offsetof(pg_host_services_t, reduce_to) + sizeof(void (*)(void)))

/* The rendezvous key-value store, already scoped to one group (keys are private to it).
 * Functions may block (get waits for the key) and are safe from any thread. */
typedef struct pg_host_store {
  uint32_t struct_size;
  uint32_t reserved0;
  void* ctx;
  pg_status_t (*set)(void* ctx, const char* key, const void* value, uint64_t length);
  /* Waits until key exists (up to timeout_ms, < 0: the group timeout); *value is malloc'd
   * by the host and released with free_value. PG_ERR_TIMEOUT if it never appears. */
  pg_status_t (*get)(void* ctx, const char* key, int64_t timeout_ms, void** value,
                     uint64_t* length);
  void (*free_value)(void* ctx, void* value);
  /* Atomically adds delta to the integer at key (missing: 0) and returns the new value. */
  pg_status_t (*add)(void* ctx, const char* key, int64_t delta, int64_t* result);
  pg_status_t (*remove)(void* ctx, const char* key);
} pg_host_store_t;

/* ---- What the core asks of a backend ------------------------------------------- */

typedef struct pg_backend_group_s* pg_backend_group_t; /* the backend's own */
typedef struct pg_backend_work_s* pg_backend_work_t;   /* the backend's own */

typedef struct pg_backend_group_config {
  uint32_t struct_size;
  int32_t rank;
  int32_t size;
  int32_t local_rank;
  int32_t local_size;
  int32_t device_type;        /* hint from the user; -1 none */
  int64_t timeout_ms;         /* the group timeout; always > 0 */
  const pg_host_store_t* store; /* valid until group_destroy returns */
  const char* group_id;       /* unique per group in the job, same on every member */
  const char* master_addr;    /* the address the store listens on (for interface choice) */
  /* Appended to version 1: the host services (as in negotiation), so that a plugin needs no
   * global; absent from a config shorter than PG_BACKEND_GROUP_CONFIG_HOST_SIZE (an older
   * core), and NULL means the negotiated ones. */
  const pg_host_services_t* host;
} pg_backend_group_config_t;

/* Every config reaches at least this far (through master_addr) in interface version 1. */
#define PG_BACKEND_GROUP_CONFIG_V1_SIZE \
  (offsetof(pg_backend_group_config_t, master_addr) + sizeof(const char*))
/* A config at least this large has the host entry (which may still be NULL). */
#define PG_BACKEND_GROUP_CONFIG_HOST_SIZE \
  (offsetof(pg_backend_group_config_t, host) + sizeof(const pg_host_services_t*))

/* One operation. Buffers follow the user ABI's count rules; input == output (same data
 * pointer) means in place, and for allgather/gather input may sit inside output at
 * rank*n, for reduce_scatter/scatter output inside input at rank*n. Absent buffers
 * (non-roots) have data == NULL, count == 0 and dtype PG_DTYPE_INVALID. reduce_op is never
 * AVG unless the plugin declared PG_REDUCE_AVG.
 *
 * What the core has validated before a plugin sees an op (a plugin need not check again):
 * op is one the plugin declared (entry and native_ops bit), with a dtype in native_dtypes,
 * a reduce op in native_reduce_ops and a device in devices; root and peer are ranks of the
 * group; every buffer this rank passes has a valid dtype and device, data != NULL when
 * count > 0, count <= 2^56, and input and output agree on dtype and device; counts follow
 * the rules above; overlap exists only in the exact in-place forms; and the in-place input
 * is resolved (input.data is where the data sits, never absent where the op reads it). Not
 * checked: that the memory is really of that device, and that other ranks agree.
 * block_count and in_place carry the core's plan (see PG_BACKEND_OP_PLAN_SIZE). */
typedef struct pg_backend_op {
  uint32_t struct_size;
  int32_t op;          /* pg_op_t */
  int32_t reduce_op;
  int32_t root;
  int32_t peer;
  int32_t reserved0;
  uint64_t tag;
  uint64_t seq;        /* collectives: per-group sequence number, from 1, equal on every
                        * rank; send/recv: 0 (or, inside a core-emulated collective, its seq) */
  int64_t timeout_ms;  /* remaining time the backend should allow */
  pg_buffer_t input;
  pg_buffer_t output;
  /* Appended to version 1, absent from an op shorter than PG_BACKEND_OP_PLAN_SIZE (an older
   * core): the core's plan. block_count is n, the elements per rank per block (input and
   * output hold 1 or size blocks: allgather's output size*n, reduce_scatter's input size*n,
   * alltoall's both, send/recv their buffer's count, barrier 0). in_place is 1 when the
   * input already sits where the output wants it (input == output, or the rank*n forms),
   * else 0. */
  uint64_t block_count;
  uint32_t in_place;
  uint32_t reserved1;
} pg_backend_op_t;

/* An op at least this large carries the planned fields (block_count, in_place). */
#define PG_BACKEND_OP_PLAN_SIZE (offsetof(pg_backend_op_t, reserved1) + sizeof(uint32_t))

/* Starts op asynchronously and returns a work in *work. */
typedef pg_status_t (*pg_backend_op_fn)(pg_backend_group_t group, const pg_backend_op_t* op,
                                        pg_backend_work_t* work);

/* pg_group_split done by the backend (ncclCommSplit, say); without this entry the core
 * makes each subgroup with group_create. Collective over every rank of parent, called in
 * the same order everywhere, and by every rank: one with color PG_SPLIT_NO_COLOR too
 * (config NULL, *out must stay NULL), since ncclCommSplit needs every parent rank. For a
 * member, config is exactly what group_create would get for the child: its own store scope
 * and group_id, rank and size in (key, parent rank) order, the group timeout, the device
 * hint. The plugin may derive the child from parent or rendezvous through config->store;
 * either way it gives up after config->timeout_ms. */
typedef pg_status_t (*pg_backend_split_fn)(pg_backend_group_t parent, int32_t color, int32_t key,
                                           const pg_backend_group_config_t* config,
                                           pg_backend_group_t* out);

/* Completion notice for work_on_complete: user is what the core passed. */
typedef void (*pg_backend_work_done_fn)(void* user);
/* Asks the backend to call done(user) exactly once when work completes (successfully or
 * not, aborted included): from any thread, or before returning if the work has completed
 * already. done may call work_test on the work (it must then report the final status), so
 * call it without holding a lock that work_test takes. The core calls this at most once
 * per work and does not release the work before done has run. Without this entry the core
 * waits for works on a thread of its own when the user asks for a completion callback. */
typedef pg_status_t (*pg_backend_on_complete_fn)(pg_backend_work_t work,
                                                 pg_backend_work_done_fn done, void* user);

typedef struct pg_backend_ops {
  uint32_t struct_size;
  uint32_t reserved0;
  /* Collective over config->size ranks: rendezvous through config->store. */
  pg_status_t (*group_create)(const pg_backend_group_config_t* config,
                              pg_backend_group_t* out);
  /* Frees the group; pending works must already be complete or released. */
  pg_status_t (*group_destroy)(pg_backend_group_t group);
  /* Makes pending and future works fail promptly; callable from any thread. */
  pg_status_t (*group_abort)(pg_backend_group_t group);
  pg_status_t (*work_test)(pg_backend_work_t work);
  pg_status_t (*work_wait)(pg_backend_work_t work, int64_t timeout_ms);
  void (*work_release)(pg_backend_work_t work);
  /* Operations, indexed like pg_op_t; NULL: not native. */
  pg_backend_op_fn allreduce;
  pg_backend_op_fn broadcast;
  pg_backend_op_fn reduce;
  pg_backend_op_fn allgather;
  pg_backend_op_fn reduce_scatter;
  pg_backend_op_fn gather;
  pg_backend_op_fn scatter;
  pg_backend_op_fn alltoall;
  pg_backend_op_fn barrier;
  pg_backend_op_fn send;
  pg_backend_op_fn recv;
  /* Optional, appended to version 1 (see pg_backend_split_fn): absent from a table shorter
   * than PG_BACKEND_OPS_SPLIT_SIZE, or NULL. */
  pg_backend_split_fn group_split;
  /* Optional, appended to version 1 (see pg_backend_on_complete_fn): absent from a table
   * shorter than PG_BACKEND_OPS_ON_COMPLETE_SIZE, or NULL. */
  pg_backend_on_complete_fn work_on_complete;
} pg_backend_ops_t;

/* Every table must reach at least this far (through recv) for interface version 1. */
#define PG_BACKEND_OPS_V1_SIZE (offsetof(pg_backend_ops_t, recv) + sizeof(pg_backend_op_fn))
/* A table at least this large has the group_split entry (which may still be NULL). */
#define PG_BACKEND_OPS_SPLIT_SIZE \
  (offsetof(pg_backend_ops_t, group_split) + sizeof(pg_backend_split_fn))

/* A table at least this large has the work_on_complete entry (which may still be NULL). */
#define PG_BACKEND_OPS_ON_COMPLETE_SIZE \
  (offsetof(pg_backend_ops_t, work_on_complete) + sizeof(pg_backend_on_complete_fn))

/* pg_group_split's "join no subgroup" color, as in procgroup.h. */
#ifndef PG_SPLIT_NO_COLOR
#define PG_SPLIT_NO_COLOR (-1)
#endif

typedef struct pg_backend_negotiate_in {
  uint32_t struct_size;
  uint32_t min_version;   /* the core speaks interface versions min..max */
  uint32_t max_version;
  uint32_t reserved0;
  const pg_host_services_t* host; /* valid for as long as the plugin stays loaded */
} pg_backend_negotiate_in_t;

typedef struct pg_backend_negotiate_out {
  uint32_t struct_size;   /* set by the core: fill only what fits */
  uint32_t version;       /* chosen, within [min_version, max_version] */
  const char* name;       /* static string, [a-z0-9_]+ */
  const char* description;/* static string, free text (library versions, ...) */
  uint32_t native_ops;    /* 1u << PG_OP_x */
  uint32_t native_dtypes; /* 1u << PG_DTYPE_x */
  uint32_t native_reduce_ops; /* 1u << PG_REDUCE_x */
  uint32_t devices;       /* 1u << PG_DEVICE_x */
  const pg_backend_ops_t* ops; /* static, const, struct_size >= PG_BACKEND_OPS_V1_SIZE */
} pg_backend_negotiate_out_t;

typedef pg_status_t (*pg_backend_negotiate_fn)(const pg_backend_negotiate_in_t* in,
                                               pg_backend_negotiate_out_t* out);
#define PG_BACKEND_NEGOTIATE_SYMBOL "pg_backend_negotiate"

PG_BACKEND_EXPORT pg_status_t pg_backend_negotiate(const pg_backend_negotiate_in_t* in,
                                                   pg_backend_negotiate_out_t* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PROCGROUP_PROCGROUP_BACKEND_H_ */
