/* v1_surface.h — the whole of ABI version 1 as X-macros: every struct, every field of
 * each, every constant. layout_probe.c expands them against a header (the frozen v1 copy in
 * frozen/v1/, or today's api/include) into a table, and frozen_v1_test.cc compares the
 * two: today's headers must keep each v1 field at its offset with its size, each struct
 * at least as large and as aligned, and each constant's value. Append-only, like the ABI:
 * fields added in a later minor version belong in a v2 list, never here. */
#ifndef PROCGROUP_TESTS_ABI_V1_SURFACE_H_
#define PROCGROUP_TESTS_ABI_V1_SURFACE_H_

#define PG_V1_STRUCTS(X) \
  X(pg_buffer_t) \
  X(pg_group_options_t) \
  X(pg_capabilities_t) \
  X(pg_op_options_t) \
  X(pg_host_services_t) \
  X(pg_host_store_t) \
  X(pg_backend_group_config_t) \
  X(pg_backend_op_t) \
  X(pg_backend_ops_t) \
  X(pg_backend_negotiate_in_t) \
  X(pg_backend_negotiate_out_t)

#define PG_V1_FIELDS(X) \
  X(pg_buffer_t, struct_size) \
  X(pg_buffer_t, dtype) \
  X(pg_buffer_t, data) \
  X(pg_buffer_t, count) \
  X(pg_buffer_t, device_type) \
  X(pg_buffer_t, device_index) \
  X(pg_buffer_t, stream) \
  X(pg_group_options_t, struct_size) \
  X(pg_group_options_t, rank) \
  X(pg_group_options_t, size) \
  X(pg_group_options_t, local_rank) \
  X(pg_group_options_t, local_size) \
  X(pg_group_options_t, master_port) \
  X(pg_group_options_t, master_addr) \
  X(pg_group_options_t, store_url) \
  X(pg_group_options_t, backend) \
  X(pg_group_options_t, store_token) \
  X(pg_group_options_t, timeout_ms) \
  X(pg_group_options_t, device_type) \
  X(pg_group_options_t, reserved0) \
  X(pg_group_options_t, name) \
  X(pg_capabilities_t, struct_size) \
  X(pg_capabilities_t, native_ops) \
  X(pg_capabilities_t, native_dtypes) \
  X(pg_capabilities_t, native_reduce_ops) \
  X(pg_capabilities_t, devices) \
  X(pg_op_options_t, struct_size) \
  X(pg_op_options_t, reduce_op) \
  X(pg_op_options_t, root) \
  X(pg_op_options_t, peer) \
  X(pg_op_options_t, tag) \
  X(pg_op_options_t, reserved0) \
  X(pg_op_options_t, timeout_ms) \
  X(pg_host_services_t, struct_size) \
  X(pg_host_services_t, reserved0) \
  X(pg_host_services_t, ctx) \
  X(pg_host_services_t, log) \
  X(pg_host_services_t, set_error) \
  X(pg_host_services_t, reduce) \
  X(pg_host_services_t, scale_down) \
  X(pg_host_store_t, struct_size) \
  X(pg_host_store_t, reserved0) \
  X(pg_host_store_t, ctx) \
  X(pg_host_store_t, set) \
  X(pg_host_store_t, get) \
  X(pg_host_store_t, free_value) \
  X(pg_host_store_t, add) \
  X(pg_host_store_t, remove) \
  X(pg_backend_group_config_t, struct_size) \
  X(pg_backend_group_config_t, rank) \
  X(pg_backend_group_config_t, size) \
  X(pg_backend_group_config_t, local_rank) \
  X(pg_backend_group_config_t, local_size) \
  X(pg_backend_group_config_t, device_type) \
  X(pg_backend_group_config_t, timeout_ms) \
  X(pg_backend_group_config_t, store) \
  X(pg_backend_group_config_t, group_id) \
  X(pg_backend_group_config_t, master_addr) \
  X(pg_backend_op_t, struct_size) \
  X(pg_backend_op_t, op) \
  X(pg_backend_op_t, reduce_op) \
  X(pg_backend_op_t, root) \
  X(pg_backend_op_t, peer) \
  X(pg_backend_op_t, reserved0) \
  X(pg_backend_op_t, tag) \
  X(pg_backend_op_t, seq) \
  X(pg_backend_op_t, timeout_ms) \
  X(pg_backend_op_t, input) \
  X(pg_backend_op_t, output) \
  X(pg_backend_ops_t, struct_size) \
  X(pg_backend_ops_t, reserved0) \
  X(pg_backend_ops_t, group_create) \
  X(pg_backend_ops_t, group_destroy) \
  X(pg_backend_ops_t, group_abort) \
  X(pg_backend_ops_t, work_test) \
  X(pg_backend_ops_t, work_wait) \
  X(pg_backend_ops_t, work_release) \
  X(pg_backend_ops_t, allreduce) \
  X(pg_backend_ops_t, broadcast) \
  X(pg_backend_ops_t, reduce) \
  X(pg_backend_ops_t, allgather) \
  X(pg_backend_ops_t, reduce_scatter) \
  X(pg_backend_ops_t, gather) \
  X(pg_backend_ops_t, scatter) \
  X(pg_backend_ops_t, alltoall) \
  X(pg_backend_ops_t, barrier) \
  X(pg_backend_ops_t, send) \
  X(pg_backend_ops_t, recv) \
  X(pg_backend_negotiate_in_t, struct_size) \
  X(pg_backend_negotiate_in_t, min_version) \
  X(pg_backend_negotiate_in_t, max_version) \
  X(pg_backend_negotiate_in_t, reserved0) \
  X(pg_backend_negotiate_in_t, host) \
  X(pg_backend_negotiate_out_t, struct_size) \
  X(pg_backend_negotiate_out_t, version) \
  X(pg_backend_negotiate_out_t, name) \
  X(pg_backend_negotiate_out_t, description) \
  X(pg_backend_negotiate_out_t, native_ops) \
  X(pg_backend_negotiate_out_t, native_dtypes) \
  X(pg_backend_negotiate_out_t, native_reduce_ops) \
  X(pg_backend_negotiate_out_t, devices) \
  X(pg_backend_negotiate_out_t, ops)

#define PG_V1_CONSTANTS(X) \
  X(PG_OK) \
  X(PG_PENDING) \
  X(PG_ERR_INVALID_ARGUMENT) \
  X(PG_ERR_UNSUPPORTED) \
  X(PG_ERR_TIMEOUT) \
  X(PG_ERR_PEER_LOST) \
  X(PG_ERR_ABORTED) \
  X(PG_ERR_MISMATCH) \
  X(PG_ERR_BACKEND_NOT_FOUND) \
  X(PG_ERR_ABI_MISMATCH) \
  X(PG_ERR_BACKEND) \
  X(PG_ERR_STORE) \
  X(PG_ERR_AUTH) \
  X(PG_ERR_OUT_OF_MEMORY) \
  X(PG_ERR_CONFIG) \
  X(PG_ERR_INTERNAL) \
  X(PG_DTYPE_INVALID) \
  X(PG_DTYPE_F32) \
  X(PG_DTYPE_F64) \
  X(PG_DTYPE_F16) \
  X(PG_DTYPE_BF16) \
  X(PG_DTYPE_I8) \
  X(PG_DTYPE_U8) \
  X(PG_DTYPE_I32) \
  X(PG_DTYPE_I64) \
  X(PG_REDUCE_SUM) \
  X(PG_REDUCE_AVG) \
  X(PG_REDUCE_PROD) \
  X(PG_REDUCE_MIN) \
  X(PG_REDUCE_MAX) \
  X(PG_DEVICE_CPU) \
  X(PG_DEVICE_CUDA) \
  X(PG_OP_ALLREDUCE) \
  X(PG_OP_BROADCAST) \
  X(PG_OP_REDUCE) \
  X(PG_OP_ALLGATHER) \
  X(PG_OP_REDUCE_SCATTER) \
  X(PG_OP_GATHER) \
  X(PG_OP_SCATTER) \
  X(PG_OP_ALLTOALL) \
  X(PG_OP_BARRIER) \
  X(PG_OP_SEND) \
  X(PG_OP_RECV) \
  X(PG_LOG_ERROR) \
  X(PG_LOG_WARN) \
  X(PG_LOG_INFO) \
  X(PG_LOG_DEBUG) \
  X(PG_ABI_VERSION_MAJOR) \
  X(PG_SPLIT_NO_COLOR) \
  X(PG_BACKEND_RESERVED_TAG_BASE) \
  X(PG_BACKEND_OPS_V1_SIZE)

#endif /* PROCGROUP_TESTS_ABI_V1_SURFACE_H_ */
