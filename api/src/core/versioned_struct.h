// Structs crossing the C ABI grow by appending fields. An older caller's struct is smaller
// than ours (it ends at the version it was built with), a newer caller's larger. Anything
// at least as large as version 1 is accepted: we copy the bytes the caller has and keep
// our defaults for the rest. A smaller struct_size is an error naming the *_INIT macro.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "common/status.h"
#include "procgroup/procgroup.h"

namespace procgroup::detail {

// Sizes at ABI 1.0: through each struct's last version-1 field, whatever is appended later.
inline constexpr size_t kBufferV1Size = offsetof(pg_buffer_t, stream) + sizeof(void*);
inline constexpr size_t kGroupOptionsV1Size =
    offsetof(pg_group_options_t, name) + sizeof(const char*);
inline constexpr size_t kOpOptionsV1Size = offsetof(pg_op_options_t, timeout_ms) + sizeof(int64_t);
inline constexpr size_t kCapabilitiesV1Size =
    offsetof(pg_capabilities_t, devices) + sizeof(uint32_t);

// Copies *in over defaults (only the bytes the caller's struct_size covers).
template <class T>
Result<T> read_versioned(const T& in, size_t v1_size, T defaults, const char* what,
                         const char* init_macro) {
  if (in.struct_size < v1_size)
    return make_error(PG_ERR_INVALID_ARGUMENT,
                      "{} has struct_size {} (expected at least {}); initialise it with {}", what,
                      in.struct_size, v1_size, init_macro);
  std::memcpy(&defaults, &in, std::min<size_t>(in.struct_size, sizeof(T)));
  defaults.struct_size = sizeof(T);
  return defaults;
}

}  // namespace procgroup::detail
