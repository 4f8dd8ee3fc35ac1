// Facts about the ABI's enumerations (element sizes, printable names), for the library's
// own code under its usual namespace. The one definition is the backend kit's
// (procgroup/backend_kit/dtype.hpp and op_table.hpp), shared with the plugins.
#pragma once

#include "procgroup/backend_kit/dtype.hpp"
#include "procgroup/backend_kit/op_table.hpp"
#include "procgroup/procgroup.h"

namespace procgroup::detail {

using kit::device_name;        // "cpu", "cuda"
using kit::dtype_is_floating;
using kit::dtype_name;         // "f32", "bf16", ...; "invalid" otherwise
using kit::dtype_size;         // bytes per element; 0 for an invalid dtype
using kit::dtype_valid;
using kit::op_name;            // "allreduce", "reduce_scatter", ...; "invalid" otherwise
using kit::reduce_op_name;     // "sum", "avg", ...
using kit::reduce_op_valid;

}  // namespace procgroup::detail
