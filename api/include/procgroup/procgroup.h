/* procgroup.h — the procgroup user C ABI (ProcessGroup ABI), version 1.
 *
 * A process group is a set of ranks that run collectives together through a backend
 * plugin (gloo, ucx, nccl, loopback or any .so) that libprocgroup loads at run time.
 * Every function returns a pg_status_t; pg_last_error() gives this thread's message for
 * the last failure. Compiles as C11 and as C++.
 *
 *   pg_group_t g;
 *   if (pg_group_create(NULL, &g) != PG_OK)          // rank/size from torchrun-style env
 *     fprintf(stderr, "%s\n", pg_last_error());
 *   float x[4] = {1, 2, 3, 4};
 *   pg_buffer_t buf = pg_buffer_cpu(x, 4, PG_DTYPE_F32);
 *   pg_allreduce(g, NULL, &buf, NULL, NULL);          // in place, sum, blocking
 *   pg_group_destroy(g);
 *
 * Rules that hold for every function below:
 * - Structs start with struct_size (set it with the *_INIT macro) and only ever grow;
 *   a zero field means "default".
 * - A NULL work pointer makes an operation blocking; otherwise *work receives a handle
 *   that the caller must pg_work_release(). Buffers must stay valid until the work
 *   completes (or the group is destroyed).
 * - Functions are thread-safe unless noted. Operations on one group must be issued in
 *   the same order on every rank (as in MPI and NCCL).
 */
#ifndef PROCGROUP_PROCGROUP_H_
#define PROCGROUP_PROCGROUP_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define PG_API __declspec(dllimport)
#elif defined(PROCGROUP_BUILDING_LIBRARY)
#define PG_API __attribute__((visibility("default")))
#else
#define PG_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version of this header. Minor versions only append; a new major breaks.
 * 1.1 appended pg_group_create_with_store, pg_work_on_complete and pg_timeline_mark. */
#define PG_ABI_VERSION_MAJOR 1
#define PG_ABI_VERSION_MINOR 1
#define PG_ABI_VERSION ((uint32_t)((PG_ABI_VERSION_MAJOR << 16) | PG_ABI_VERSION_MINOR))

/* ---- Types shared, byte for byte, with procgroup_backend.h ---------------------- */
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

#define PG_BUFFER_INIT {sizeof(pg_buffer_t), PG_DTYPE_INVALID, NULL, 0, PG_DEVICE_CPU, 0, NULL}

/* Convenience: a CPU buffer. */
static inline pg_buffer_t pg_buffer_cpu(void* data, uint64_t count, pg_dtype_t dtype) {
  pg_buffer_t b = PG_BUFFER_INIT;
  b.data = data;
  b.count = count;
  b.dtype = dtype;
  return b;
}

/* ---- Status and errors --------------------------------------------------------- */

/* "PG_OK", "PG_ERR_TIMEOUT", ...; "PG_UNKNOWN_STATUS" for values this version lacks.
 * The string is static. */
PG_API const char* pg_status_name(pg_status_t status);

/* The message of the last non-OK status returned to this thread ("" if none). Valid until
 * this thread's next procgroup call. */
PG_API const char* pg_last_error(void);

/* Library version (of libprocgroup, not of the header the caller used). */
PG_API pg_status_t pg_get_version(uint32_t* major, uint32_t* minor);

/* ---- Groups -------------------------------------------------------------------- */

typedef struct pg_group_s* pg_group_t;
typedef struct pg_work_s* pg_work_t;

/* Options for pg_group_create. size == 0 means "from the environment": RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun), else SLURM_* or
 * OMPI_COMM_WORLD_*. Any string or number set here overrides the environment. */
typedef struct pg_group_options {
  uint32_t struct_size;
  int32_t rank;            /* 0 <= rank < size; used only when size > 0 */
  int32_t size;            /* 0: from the environment */
  int32_t local_rank;      /* used only when size > 0 */
  int32_t local_size;      /* 0: same as size (one node) when size > 0 */
  int32_t master_port;     /* 0: MASTER_PORT, else 29500 */
  const char* master_addr; /* NULL: MASTER_ADDR, else 127.0.0.1 */
  const char* store_url;   /* NULL: tcp://master_addr:master_port; or file:///path */
  const char* backend;     /* NULL: PROCGROUP_BACKEND, else the default; name or .so path */
  const char* store_token; /* NULL: PROCGROUP_STORE_TOKEN (no authentication if unset) */
  int64_t timeout_ms;      /* 0: PROCGROUP_TIMEOUT (seconds), else 300 s */
  int32_t device_type;     /* hint for choosing the default backend */
  int32_t reserved0;
  const char* name;        /* NULL: "world"; distinct names give independent groups */
} pg_group_options_t;

#define PG_GROUP_OPTIONS_INIT \
  {sizeof(pg_group_options_t), 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, 0, 0, 0, NULL}

/* Creates a group; collective over all its ranks (each waits for the others up to the
 * timeout). opts may be NULL (everything from the environment). Use pg_group_create(),
 * which passes the header version this program was compiled against. */
PG_API pg_status_t pg_group_create_versioned(uint32_t caller_abi_version,
                                             const pg_group_options_t* opts,
                                             pg_group_t* out);
static inline pg_status_t pg_group_create(const pg_group_options_t* opts, pg_group_t* out) {
  return pg_group_create_versioned(PG_ABI_VERSION, opts, out);
}

/* A rendezvous key-value store the caller already has (PyTorch's c10d::Store, a job
 * service, ...), for pg_group_create_with_store: the group rendezvous through it instead of
 * opening store_url, so no port is bound. Keys it receives are private to procgroup
 * ("pg/<group name>/..."); groups created on one store need distinct names.
 * Every callback may block, is called from any thread, and returns PG_OK or an error
 * status (PG_ERR_STORE, PG_ERR_TIMEOUT, ...); error_message, if set, then gives the
 * calling thread's message for it. All callbacks are required except error_message. */
typedef struct pg_store {
  uint32_t struct_size;
  uint32_t reserved0;
  void* ctx;
  pg_status_t (*set)(void* ctx, const char* key, const void* value, uint64_t length);
  /* Waits until key exists, up to timeout_ms; *value is allocated by the store and given
   * back through free_value. PG_ERR_TIMEOUT naming the key if it never appears. */
  pg_status_t (*get)(void* ctx, const char* key, int64_t timeout_ms, void** value,
                     uint64_t* length);
  void (*free_value)(void* ctx, void* value);
  /* Atomically adds delta to the decimal integer at key (missing: 0); *result = new value. */
  pg_status_t (*add)(void* ctx, const char* key, int64_t delta, int64_t* result);
  /* *exists = 1 if key exists now, else 0; never waits. */
  pg_status_t (*check)(void* ctx, const char* key, int32_t* exists);
  /* Deletes key; a missing key is not an error. */
  pg_status_t (*remove)(void* ctx, const char* key);
  const char* (*error_message)(void* ctx);
} pg_store_t;
#define PG_STORE_INIT {sizeof(pg_store_t), 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL}

/* As pg_group_create, but rendezvous through store (copied; the callbacks and ctx must
 * stay valid until every group created on it, subgroups included, is destroyed). opts
 * must not set store_url or store_token, which belong to procgroup's own store. */
PG_API pg_status_t pg_group_create_with_store_versioned(uint32_t caller_abi_version,
                                                        const pg_group_options_t* opts,
                                                        const pg_store_t* store, pg_group_t* out);
static inline pg_status_t pg_group_create_with_store(const pg_group_options_t* opts,
                                                     const pg_store_t* store, pg_group_t* out) {
  return pg_group_create_with_store_versioned(PG_ABI_VERSION, opts, store, out);
}

/* Collective over parent: ranks with the same color form a new group, ordered by key
 * (ties by parent rank). color == PG_SPLIT_NO_COLOR joins none and gets *out = NULL. */
#define PG_SPLIT_NO_COLOR (-1)
PG_API pg_status_t pg_group_split(pg_group_t parent, int32_t color, int32_t key,
                                  pg_group_t* out);

/* Marks the group failed: pending and later works finish with PG_ERR_ABORTED. Local,
 * not collective; safe from any thread (e.g. a watchdog). */
PG_API pg_status_t pg_group_abort(pg_group_t group);

/* Waits for outstanding works (up to the timeout), then frees the group. Unreleased work
 * handles stay valid to test and release. */
PG_API pg_status_t pg_group_destroy(pg_group_t group);

PG_API pg_status_t pg_group_rank(pg_group_t group, int32_t* rank);
PG_API pg_status_t pg_group_size(pg_group_t group, int32_t* size);
/* The backend's name ("gloo", ...); static for the life of the group. */
PG_API pg_status_t pg_group_backend_name(pg_group_t group, const char** name);

/* Bit masks: bit (1u << PG_OP_x), (1u << PG_DTYPE_x), (1u << PG_REDUCE_x),
 * (1u << PG_DEVICE_x). native_* is what the backend runs itself; every CPU operation,
 * dtype and reduce op is available regardless, through the core's emulation. */
typedef struct pg_capabilities {
  uint32_t struct_size;
  uint32_t native_ops;
  uint32_t native_dtypes;
  uint32_t native_reduce_ops;
  uint32_t devices;
} pg_capabilities_t;
#define PG_CAPABILITIES_INIT {sizeof(pg_capabilities_t), 0, 0, 0, 0}
PG_API pg_status_t pg_group_capabilities(pg_group_t group, pg_capabilities_t* caps);

/* ---- Operations ---------------------------------------------------------------- */

typedef struct pg_op_options {
  uint32_t struct_size;
  int32_t reduce_op;  /* pg_reduce_op_t; default sum */
  int32_t root;       /* rooted ops; default 0 */
  int32_t peer;       /* send / recv */
  int32_t tag;        /* send / recv; 0 <= tag < 2^30 */
  int32_t reserved0;
  int64_t timeout_ms; /* 0: the group timeout */
} pg_op_options_t;
#define PG_OP_OPTIONS_INIT {sizeof(pg_op_options_t), 0, 0, 0, 0, 0, 0}

/* Every operation takes (input, output). Counts are per rank, n elements:
 *   allreduce, broadcast, reduce: input n, output n
 *   allgather: input n, output size*n         reduce_scatter: input size*n, output n
 *   gather:    input n, output size*n (root)  scatter:        input size*n (root), output n
 *   alltoall:  input size*n, output size*n (block j goes to rank j)
 * In place: pass input = NULL (or input->data == the in-place address): the data is then
 * output for allreduce/broadcast/reduce/alltoall, output + rank*n for allgather/gather,
 * and for reduce_scatter/scatter the output must point at input + rank*n.
 * Non-roots may pass NULL output to reduce/gather and NULL input to scatter.
 * opts may be NULL (defaults). work may be NULL (blocking). Buffers of all ranks must agree
 * on dtype and n; any other overlap of input and output is rejected. */
PG_API pg_status_t pg_allreduce(pg_group_t group, const pg_buffer_t* input,
                                const pg_buffer_t* output, const pg_op_options_t* opts,
                                pg_work_t* work);
PG_API pg_status_t pg_broadcast(pg_group_t group, const pg_buffer_t* input,
                                const pg_buffer_t* output, const pg_op_options_t* opts,
                                pg_work_t* work);
PG_API pg_status_t pg_reduce(pg_group_t group, const pg_buffer_t* input,
                             const pg_buffer_t* output, const pg_op_options_t* opts,
                             pg_work_t* work);
PG_API pg_status_t pg_allgather(pg_group_t group, const pg_buffer_t* input,
                                const pg_buffer_t* output, const pg_op_options_t* opts,
                                pg_work_t* work);
PG_API pg_status_t pg_reduce_scatter(pg_group_t group, const pg_buffer_t* input,
                                     const pg_buffer_t* output, const pg_op_options_t* opts,
                                     pg_work_t* work);
PG_API pg_status_t pg_gather(pg_group_t group, const pg_buffer_t* input,
                             const pg_buffer_t* output, const pg_op_options_t* opts,
                             pg_work_t* work);
PG_API pg_status_t pg_scatter(pg_group_t group, const pg_buffer_t* input,
                              const pg_buffer_t* output, const pg_op_options_t* opts,
                              pg_work_t* work);
PG_API pg_status_t pg_alltoall(pg_group_t group, const pg_buffer_t* input,
                               const pg_buffer_t* output, const pg_op_options_t* opts,
                               pg_work_t* work);
PG_API pg_status_t pg_barrier(pg_group_t group, const pg_op_options_t* opts, pg_work_t* work);
/* Point to point: matched by (peer, tag) in issue order. */
PG_API pg_status_t pg_send(pg_group_t group, const pg_buffer_t* buffer,
                           const pg_op_options_t* opts, pg_work_t* work);
PG_API pg_status_t pg_recv(pg_group_t group, const pg_buffer_t* buffer,
                           const pg_op_options_t* opts, pg_work_t* work);

/* ---- Timeline ------------------------------------------------------------------ */

/* pg_timeline_mark's phase: opens the span (category, name, id), closes it, or marks a
 * moment inside span id. */
#define PG_TIMELINE_BEGIN 0
#define PG_TIMELINE_END 1
#define PG_TIMELINE_INSTANT 2
/* With PROCGROUP_TIMELINE set, puts the caller's own work on the group's track of the
 * timeline next to its operations (ddp marks its gradient buckets), with bytes shown. Spans
 * may overlap; each one's id tells it apart and END pairs with the BEGIN of the same
 * category, name and id. category and name are copied (up to 31 bytes each). Does nothing,
 * cheaply, when the timeline is off. Thread-safe. */
PG_API pg_status_t pg_timeline_mark(pg_group_t group, const char* category, const char* name,
                                    uint64_t id, int32_t phase, uint64_t bytes);

/* ---- Works --------------------------------------------------------------------- */

/* PG_OK when completed successfully, PG_PENDING when still running, else the error. Never
 * blocks, also while another thread waits for the same work. */
PG_API pg_status_t pg_work_test(pg_work_t work);
/* Waits up to timeout_ms (< 0: until the group timeout); PG_PENDING if the wait's own
 * timeout ran out first (the work goes on). */
PG_API pg_status_t pg_work_wait(pg_work_t work, int64_t timeout_ms);
/* Frees the handle; a pending work is detached and still completes. NULL is ignored. */
PG_API pg_status_t pg_work_release(pg_work_t work);
/* Completion callback (pg_work_on_complete): status is the work's final status, as
 * pg_work_wait would return it; inside fn, pg_last_error() gives a failure's message. */
typedef void (*pg_work_callback_t)(pg_status_t status, void* user);
/* Calls fn(status, user) once when the work completes: on a thread of the library or its
 * backend (the one that completed the work), or on this thread before returning if it has
 * completed already. A work still pending at the group timeout fails with PG_ERR_TIMEOUT
 * as it would in pg_work_wait, and fn gets that. fn should be quick and must not block or
 * wait for works; it runs even if the handle was released first. One callback per work:
 * a second call is PG_ERR_INVALID_ARGUMENT. */
PG_API pg_status_t pg_work_on_complete(pg_work_t work, pg_work_callback_t fn, void* user);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PROCGROUP_PROCGROUP_H_ */
