#include "common/dtype.h"

namespace procgroup::detail {

size_t dtype_size(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32: return 4;
    case PG_DTYPE_F64: return 8;
    case PG_DTYPE_F16: return 2;
    case PG_DTYPE_BF16: return 2;
    case PG_DTYPE_I8: return 1;
    case PG_DTYPE_U8: return 1;
    case PG_DTYPE_I32: return 4;
    case PG_DTYPE_I64: return 8;
    default: return 0;
  }
}

bool dtype_valid(pg_dtype_t dtype) { return dtype_size(dtype) != 0; }

bool dtype_is_floating(pg_dtype_t dtype) {
  return dtype == PG_DTYPE_F32 || dtype == PG_DTYPE_F64 || dtype == PG_DTYPE_F16 ||
         dtype == PG_DTYPE_BF16;
}

const char* dtype_name(pg_dtype_t dtype) {
  switch (dtype) {
    case PG_DTYPE_F32: return "f32";
    case PG_DTYPE_F64: return "f64";
    case PG_DTYPE_F16: return "f16";
    case PG_DTYPE_BF16: return "bf16";
    case PG_DTYPE_I8: return "i8";
    case PG_DTYPE_U8: return "u8";
    case PG_DTYPE_I32: return "i32";
    case PG_DTYPE_I64: return "i64";
    default: return "invalid";
  }
}

bool reduce_op_valid(pg_reduce_op_t op) { return op >= 0 && op < PG_REDUCE_COUNT_; }

const char* reduce_op_name(pg_reduce_op_t op) {
  switch (op) {
    case PG_REDUCE_SUM: return "sum";
    case PG_REDUCE_AVG: return "avg";
    case PG_REDUCE_PROD: return "prod";
    case PG_REDUCE_MIN: return "min";
    case PG_REDUCE_MAX: return "max";
    default: return "invalid";
  }
}

const char* op_name(pg_op_t op) {
  switch (op) {
    case PG_OP_ALLREDUCE: return "allreduce";
    case PG_OP_BROADCAST: return "broadcast";
    case PG_OP_REDUCE: return "reduce";
    case PG_OP_ALLGATHER: return "allgather";
    case PG_OP_REDUCE_SCATTER: return "reduce_scatter";
    case PG_OP_GATHER: return "gather";
    case PG_OP_SCATTER: return "scatter";
    case PG_OP_ALLTOALL: return "alltoall";
    case PG_OP_BARRIER: return "barrier";
    case PG_OP_SEND: return "send";
    case PG_OP_RECV: return "recv";
    default: return "invalid";
  }
}

const char* device_name(pg_device_type_t device) {
  switch (device) {
    case PG_DEVICE_CPU: return "cpu";
    case PG_DEVICE_CUDA: return "cuda";
    default: return "invalid";
  }
}

}  // namespace procgroup::detail
