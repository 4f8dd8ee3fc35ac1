// Facts about the ABI's enumerations: element sizes and printable names.
#pragma once

#include <cstddef>

#include "procgroup/procgroup.h"

namespace procgroup::detail {

// Bytes per element; 0 for an invalid dtype.
size_t dtype_size(pg_dtype_t dtype);
bool dtype_valid(pg_dtype_t dtype);
bool dtype_is_floating(pg_dtype_t dtype);
// "f32", "bf16", ...; "invalid(N)" otherwise (static storage for valid ones).
const char* dtype_name(pg_dtype_t dtype);
// "sum", "avg", ...
const char* reduce_op_name(pg_reduce_op_t op);
bool reduce_op_valid(pg_reduce_op_t op);
// "allreduce", "reduce_scatter", ...
const char* op_name(pg_op_t op);
const char* device_name(pg_device_type_t device);

}  // namespace procgroup::detail
