/* abi_layout.h: the x86_64 LP64 layout of every ABI struct and the value of every ABI
 * constant, pinned. Included by a C file and a C++ file, so both languages' compilers are
 * held to the same numbers. A failure here means the ABI changed: if on purpose, bump the
 * interface version (append-only rules in procgroup.h) and update the numbers. */
#ifndef PROCGROUP_TESTS_ABI_ABI_LAYOUT_H_
#define PROCGROUP_TESTS_ABI_ABI_LAYOUT_H_

#include <procgroup/procgroup.h>
#include <procgroup/procgroup_backend.h>

#ifndef __cplusplus
#include <assert.h> /* static_assert */
#endif

#if defined(__x86_64__) && defined(__LP64__)

/* pg_buffer_t */
static_assert(sizeof(pg_buffer_t) == 40, "pg_buffer_t size");
static_assert(offsetof(pg_buffer_t, struct_size) == 0, "pg_buffer_t.struct_size");
static_assert(offsetof(pg_buffer_t, dtype) == 4, "pg_buffer_t.dtype");
static_assert(offsetof(pg_buffer_t, data) == 8, "pg_buffer_t.data");
static_assert(offsetof(pg_buffer_t, count) == 16, "pg_buffer_t.count");
static_assert(offsetof(pg_buffer_t, device_type) == 24, "pg_buffer_t.device_type");
static_assert(offsetof(pg_buffer_t, device_index) == 28, "pg_buffer_t.device_index");
static_assert(offsetof(pg_buffer_t, stream) == 32, "pg_buffer_t.stream");

/* pg_group_options_t */
static_assert(sizeof(pg_group_options_t) == 80, "pg_group_options_t size");
static_assert(offsetof(pg_group_options_t, struct_size) == 0, "pg_group_options_t.struct_size");
static_assert(offsetof(pg_group_options_t, rank) == 4, "pg_group_options_t.rank");
static_assert(offsetof(pg_group_options_t, size) == 8, "pg_group_options_t.size");
static_assert(offsetof(pg_group_options_t, local_rank) == 12, "pg_group_options_t.local_rank");
static_assert(offsetof(pg_group_options_t, local_size) == 16, "pg_group_options_t.local_size");
static_assert(offsetof(pg_group_options_t, master_port) == 20, "pg_group_options_t.master_port");
static_assert(offsetof(pg_group_options_t, master_addr) == 24, "pg_group_options_t.master_addr");
static_assert(offsetof(pg_group_options_t, store_url) == 32, "pg_group_options_t.store_url");
static_assert(offsetof(pg_group_options_t, backend) == 40, "pg_group_options_t.backend");
static_assert(offsetof(pg_group_options_t, store_token) == 48, "pg_group_options_t.store_token");
static_assert(offsetof(pg_group_options_t, timeout_ms) == 56, "pg_group_options_t.timeout_ms");
static_assert(offsetof(pg_group_options_t, device_type) == 64, "pg_group_options_t.device_type");
static_assert(offsetof(pg_group_options_t, reserved0) == 68, "pg_group_options_t.reserved0");
static_assert(offsetof(pg_group_options_t, name) == 72, "pg_group_options_t.name");

/* pg_op_options_t */
static_assert(sizeof(pg_op_options_t) == 32, "pg_op_options_t size");
static_assert(offsetof(pg_op_options_t, struct_size) == 0, "pg_op_options_t.struct_size");
static_assert(offsetof(pg_op_options_t, reduce_op) == 4, "pg_op_options_t.reduce_op");
static_assert(offsetof(pg_op_options_t, root) == 8, "pg_op_options_t.root");
static_assert(offsetof(pg_op_options_t, peer) == 12, "pg_op_options_t.peer");
static_assert(offsetof(pg_op_options_t, tag) == 16, "pg_op_options_t.tag");
static_assert(offsetof(pg_op_options_t, reserved0) == 20, "pg_op_options_t.reserved0");
static_assert(offsetof(pg_op_options_t, timeout_ms) == 24, "pg_op_options_t.timeout_ms");

/* pg_capabilities_t */
static_assert(sizeof(pg_capabilities_t) == 20, "pg_capabilities_t size");
static_assert(offsetof(pg_capabilities_t, struct_size) == 0, "pg_capabilities_t.struct_size");
static_assert(offsetof(pg_capabilities_t, native_ops) == 4, "pg_capabilities_t.native_ops");
static_assert(offsetof(pg_capabilities_t, native_dtypes) == 8, "pg_capabilities_t.native_dtypes");
static_assert(offsetof(pg_capabilities_t, native_reduce_ops) == 12,
              "pg_capabilities_t.native_reduce_ops");
static_assert(offsetof(pg_capabilities_t, devices) == 16, "pg_capabilities_t.devices");

/* pg_host_services_t (reduce_to was appended: plugins read it when struct_size covers it) */
static_assert(sizeof(pg_host_services_t) == 56, "pg_host_services_t size");
static_assert(PG_HOST_SERVICES_REDUCE_TO_SIZE == 56, "PG_HOST_SERVICES_REDUCE_TO_SIZE");
static_assert(offsetof(pg_host_services_t, struct_size) == 0, "pg_host_services_t.struct_size");
static_assert(offsetof(pg_host_services_t, reserved0) == 4, "pg_host_services_t.reserved0");
static_assert(offsetof(pg_host_services_t, ctx) == 8, "pg_host_services_t.ctx");
static_assert(offsetof(pg_host_services_t, log) == 16, "pg_host_services_t.log");
static_assert(offsetof(pg_host_services_t, set_error) == 24, "pg_host_services_t.set_error");
static_assert(offsetof(pg_host_services_t, reduce) == 32, "pg_host_services_t.reduce");
static_assert(offsetof(pg_host_services_t, scale_down) == 40, "pg_host_services_t.scale_down");
static_assert(offsetof(pg_host_services_t, reduce_to) == 48, "pg_host_services_t.reduce_to");

/* pg_store_t (appended in ABI 1.0's lifetime: a new type and entry point, nothing moved) */
static_assert(sizeof(pg_store_t) == 72, "pg_store_t size");
static_assert(offsetof(pg_store_t, struct_size) == 0, "pg_store_t.struct_size");
static_assert(offsetof(pg_store_t, reserved0) == 4, "pg_store_t.reserved0");
static_assert(offsetof(pg_store_t, ctx) == 8, "pg_store_t.ctx");
static_assert(offsetof(pg_store_t, set) == 16, "pg_store_t.set");
static_assert(offsetof(pg_store_t, get) == 24, "pg_store_t.get");
static_assert(offsetof(pg_store_t, free_value) == 32, "pg_store_t.free_value");
static_assert(offsetof(pg_store_t, add) == 40, "pg_store_t.add");
static_assert(offsetof(pg_store_t, check) == 48, "pg_store_t.check");
static_assert(offsetof(pg_store_t, remove) == 56, "pg_store_t.remove");
static_assert(offsetof(pg_store_t, error_message) == 64, "pg_store_t.error_message");

/* pg_host_store_t */
static_assert(sizeof(pg_host_store_t) == 56, "pg_host_store_t size");
static_assert(offsetof(pg_host_store_t, struct_size) == 0, "pg_host_store_t.struct_size");
static_assert(offsetof(pg_host_store_t, reserved0) == 4, "pg_host_store_t.reserved0");
static_assert(offsetof(pg_host_store_t, ctx) == 8, "pg_host_store_t.ctx");
static_assert(offsetof(pg_host_store_t, set) == 16, "pg_host_store_t.set");
static_assert(offsetof(pg_host_store_t, get) == 24, "pg_host_store_t.get");
static_assert(offsetof(pg_host_store_t, free_value) == 32, "pg_host_store_t.free_value");
static_assert(offsetof(pg_host_store_t, add) == 40, "pg_host_store_t.add");
static_assert(offsetof(pg_host_store_t, remove) == 48, "pg_host_store_t.remove");

/* pg_backend_group_config_t */
/* host was appended (optional, sized by struct_size); version 1's 56 bytes stay the minimum. */
static_assert(sizeof(pg_backend_group_config_t) == 64, "pg_backend_group_config_t size");
static_assert(PG_BACKEND_GROUP_CONFIG_V1_SIZE == 56, "PG_BACKEND_GROUP_CONFIG_V1_SIZE");
static_assert(PG_BACKEND_GROUP_CONFIG_HOST_SIZE == 64, "PG_BACKEND_GROUP_CONFIG_HOST_SIZE");
static_assert(offsetof(pg_backend_group_config_t, struct_size) == 0, "group_config.struct_size");
static_assert(offsetof(pg_backend_group_config_t, rank) == 4, "group_config.rank");
static_assert(offsetof(pg_backend_group_config_t, size) == 8, "group_config.size");
static_assert(offsetof(pg_backend_group_config_t, local_rank) == 12, "group_config.local_rank");
static_assert(offsetof(pg_backend_group_config_t, local_size) == 16, "group_config.local_size");
static_assert(offsetof(pg_backend_group_config_t, device_type) == 20, "group_config.device_type");
static_assert(offsetof(pg_backend_group_config_t, timeout_ms) == 24, "group_config.timeout_ms");
static_assert(offsetof(pg_backend_group_config_t, store) == 32, "group_config.store");
static_assert(offsetof(pg_backend_group_config_t, group_id) == 40, "group_config.group_id");
static_assert(offsetof(pg_backend_group_config_t, master_addr) == 48, "group_config.master_addr");
static_assert(offsetof(pg_backend_group_config_t, host) == 56, "group_config.host");

/* pg_backend_op_t */
/* The plan (block_count, in_place) was appended (read when struct_size covers it). */
static_assert(sizeof(pg_backend_op_t) == 144, "pg_backend_op_t size");
static_assert(PG_BACKEND_OP_PLAN_SIZE == 144, "PG_BACKEND_OP_PLAN_SIZE");
static_assert(offsetof(pg_backend_op_t, struct_size) == 0, "pg_backend_op_t.struct_size");
static_assert(offsetof(pg_backend_op_t, op) == 4, "pg_backend_op_t.op");
static_assert(offsetof(pg_backend_op_t, reduce_op) == 8, "pg_backend_op_t.reduce_op");
static_assert(offsetof(pg_backend_op_t, root) == 12, "pg_backend_op_t.root");
static_assert(offsetof(pg_backend_op_t, peer) == 16, "pg_backend_op_t.peer");
static_assert(offsetof(pg_backend_op_t, reserved0) == 20, "pg_backend_op_t.reserved0");
static_assert(offsetof(pg_backend_op_t, tag) == 24, "pg_backend_op_t.tag");
static_assert(offsetof(pg_backend_op_t, seq) == 32, "pg_backend_op_t.seq");
static_assert(offsetof(pg_backend_op_t, timeout_ms) == 40, "pg_backend_op_t.timeout_ms");
static_assert(offsetof(pg_backend_op_t, input) == 48, "pg_backend_op_t.input");
static_assert(offsetof(pg_backend_op_t, output) == 88, "pg_backend_op_t.output");
static_assert(offsetof(pg_backend_op_t, block_count) == 128, "pg_backend_op_t.block_count");
static_assert(offsetof(pg_backend_op_t, in_place) == 136, "pg_backend_op_t.in_place");
static_assert(offsetof(pg_backend_op_t, reserved1) == 140, "pg_backend_op_t.reserved1");

/* pg_backend_ops_t: the table is indexed by these offsets, so every entry is pinned. It
 * grew by appending group_split, then work_on_complete (both optional, sized by
 * struct_size); version 1's 144 bytes stay the minimum. */
static_assert(sizeof(pg_backend_ops_t) == 160, "pg_backend_ops_t size");
static_assert(PG_BACKEND_OPS_V1_SIZE == 144, "PG_BACKEND_OPS_V1_SIZE");
static_assert(PG_BACKEND_OPS_SPLIT_SIZE == 152, "PG_BACKEND_OPS_SPLIT_SIZE");
static_assert(PG_BACKEND_OPS_ON_COMPLETE_SIZE == 160, "PG_BACKEND_OPS_ON_COMPLETE_SIZE");
static_assert(offsetof(pg_backend_ops_t, struct_size) == 0, "ops.struct_size");
static_assert(offsetof(pg_backend_ops_t, reserved0) == 4, "ops.reserved0");
static_assert(offsetof(pg_backend_ops_t, group_create) == 8, "ops.group_create");
static_assert(offsetof(pg_backend_ops_t, group_destroy) == 16, "ops.group_destroy");
static_assert(offsetof(pg_backend_ops_t, group_abort) == 24, "ops.group_abort");
static_assert(offsetof(pg_backend_ops_t, work_test) == 32, "ops.work_test");
static_assert(offsetof(pg_backend_ops_t, work_wait) == 40, "ops.work_wait");
static_assert(offsetof(pg_backend_ops_t, work_release) == 48, "ops.work_release");
static_assert(offsetof(pg_backend_ops_t, allreduce) == 56, "ops.allreduce");
static_assert(offsetof(pg_backend_ops_t, broadcast) == 64, "ops.broadcast");
static_assert(offsetof(pg_backend_ops_t, reduce) == 72, "ops.reduce");
static_assert(offsetof(pg_backend_ops_t, allgather) == 80, "ops.allgather");
static_assert(offsetof(pg_backend_ops_t, reduce_scatter) == 88, "ops.reduce_scatter");
static_assert(offsetof(pg_backend_ops_t, gather) == 96, "ops.gather");
static_assert(offsetof(pg_backend_ops_t, scatter) == 104, "ops.scatter");
static_assert(offsetof(pg_backend_ops_t, alltoall) == 112, "ops.alltoall");
static_assert(offsetof(pg_backend_ops_t, barrier) == 120, "ops.barrier");
static_assert(offsetof(pg_backend_ops_t, send) == 128, "ops.send");
static_assert(offsetof(pg_backend_ops_t, recv) == 136, "ops.recv");
static_assert(offsetof(pg_backend_ops_t, group_split) == 144, "ops.group_split");
static_assert(offsetof(pg_backend_ops_t, work_on_complete) == 152, "ops.work_on_complete");

/* pg_backend_negotiate_in_t / _out_t */
static_assert(sizeof(pg_backend_negotiate_in_t) == 24, "negotiate_in size");
static_assert(offsetof(pg_backend_negotiate_in_t, struct_size) == 0, "negotiate_in.struct_size");
static_assert(offsetof(pg_backend_negotiate_in_t, min_version) == 4, "negotiate_in.min_version");
static_assert(offsetof(pg_backend_negotiate_in_t, max_version) == 8, "negotiate_in.max_version");
static_assert(offsetof(pg_backend_negotiate_in_t, reserved0) == 12, "negotiate_in.reserved0");
static_assert(offsetof(pg_backend_negotiate_in_t, host) == 16, "negotiate_in.host");
static_assert(sizeof(pg_backend_negotiate_out_t) == 48, "negotiate_out size");
static_assert(offsetof(pg_backend_negotiate_out_t, struct_size) == 0, "negotiate_out.struct_size");
static_assert(offsetof(pg_backend_negotiate_out_t, version) == 4, "negotiate_out.version");
static_assert(offsetof(pg_backend_negotiate_out_t, name) == 8, "negotiate_out.name");
static_assert(offsetof(pg_backend_negotiate_out_t, description) == 16, "negotiate_out.description");
static_assert(offsetof(pg_backend_negotiate_out_t, native_ops) == 24, "negotiate_out.native_ops");
static_assert(offsetof(pg_backend_negotiate_out_t, native_dtypes) == 28,
              "negotiate_out.native_dtypes");
static_assert(offsetof(pg_backend_negotiate_out_t, native_reduce_ops) == 32,
              "negotiate_out.native_reduce_ops");
static_assert(offsetof(pg_backend_negotiate_out_t, devices) == 36, "negotiate_out.devices");
static_assert(offsetof(pg_backend_negotiate_out_t, ops) == 40, "negotiate_out.ops");

/* Scalar and handle types. */
static_assert(sizeof(pg_status_t) == 4 && sizeof(pg_dtype_t) == 4, "pg_status_t, pg_dtype_t");
static_assert(sizeof(pg_reduce_op_t) == 4 && sizeof(pg_device_type_t) == 4 && sizeof(pg_op_t) == 4,
              "pg_reduce_op_t, pg_device_type_t, pg_op_t");
static_assert(sizeof(pg_group_t) == 8 && sizeof(pg_work_t) == 8, "handles");

#endif /* x86_64 LP64 */

/* Values: the same on every platform. */
static_assert(PG_OK == 0 && PG_PENDING == 1 && PG_ERR_INVALID_ARGUMENT == 2 &&
                  PG_ERR_UNSUPPORTED == 3 && PG_ERR_TIMEOUT == 4 && PG_ERR_PEER_LOST == 5 &&
                  PG_ERR_ABORTED == 6 && PG_ERR_MISMATCH == 7 && PG_ERR_BACKEND_NOT_FOUND == 8 &&
                  PG_ERR_ABI_MISMATCH == 9 && PG_ERR_BACKEND == 10 && PG_ERR_STORE == 11 &&
                  PG_ERR_AUTH == 12 && PG_ERR_OUT_OF_MEMORY == 13 && PG_ERR_CONFIG == 14 &&
                  PG_ERR_INTERNAL == 15,
              "pg_status_t values");
static_assert(PG_DTYPE_INVALID == 0 && PG_DTYPE_F32 == 1 && PG_DTYPE_F64 == 2 &&
                  PG_DTYPE_F16 == 3 && PG_DTYPE_BF16 == 4 && PG_DTYPE_I8 == 5 && PG_DTYPE_U8 == 6 &&
                  PG_DTYPE_I32 == 7 && PG_DTYPE_I64 == 8 && PG_DTYPE_COUNT_ == 9,
              "pg_dtype_t values");
static_assert(PG_REDUCE_SUM == 0 && PG_REDUCE_AVG == 1 && PG_REDUCE_PROD == 2 &&
                  PG_REDUCE_MIN == 3 && PG_REDUCE_MAX == 4 && PG_REDUCE_COUNT_ == 5,
              "pg_reduce_op_t values");
static_assert(PG_DEVICE_CPU == 0 && PG_DEVICE_CUDA == 1 && PG_DEVICE_COUNT_ == 2,
              "pg_device_type_t values");
static_assert(PG_OP_ALLREDUCE == 0 && PG_OP_BROADCAST == 1 && PG_OP_REDUCE == 2 &&
                  PG_OP_ALLGATHER == 3 && PG_OP_REDUCE_SCATTER == 4 && PG_OP_GATHER == 5 &&
                  PG_OP_SCATTER == 6 && PG_OP_ALLTOALL == 7 && PG_OP_BARRIER == 8 &&
                  PG_OP_SEND == 9 && PG_OP_RECV == 10 && PG_OP_COUNT_ == 11,
              "pg_op_t values");
static_assert(PG_LOG_ERROR == 0 && PG_LOG_WARN == 1 && PG_LOG_INFO == 2 && PG_LOG_DEBUG == 3,
              "PG_LOG_* values");
static_assert(PG_ABI_VERSION_MAJOR == 1 && PG_ABI_VERSION_MINOR == 1 && PG_ABI_VERSION == 0x10001u,
              "PG_ABI_VERSION");
static_assert(PG_BACKEND_INTERFACE_VERSION == 1u, "PG_BACKEND_INTERFACE_VERSION");
static_assert(PG_SPLIT_NO_COLOR == -1, "PG_SPLIT_NO_COLOR");
static_assert(PG_TIMELINE_BEGIN == 0 && PG_TIMELINE_END == 1 && PG_TIMELINE_INSTANT == 2,
              "PG_TIMELINE_* values");
static_assert(PG_BACKEND_RESERVED_TAG_BASE == 0x4000000000000000ull,
              "PG_BACKEND_RESERVED_TAG_BASE");
static_assert(sizeof(PG_BACKEND_NEGOTIATE_SYMBOL) == sizeof("pg_backend_negotiate"),
              "PG_BACKEND_NEGOTIATE_SYMBOL length");

#endif /* PROCGROUP_TESTS_ABI_ABI_LAYOUT_H_ */
