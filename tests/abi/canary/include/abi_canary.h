/* abi_canary.h — a two-function library whose version 2 breaks version 1's ABI on
 * purpose (a field inserted before others, a function removed). The ABI check compares the
 * two, which proves it fails when it should (tests/abi/CMakeLists.txt). */
#ifndef ABI_CANARY_H_
#define ABI_CANARY_H_

#include <stdint.h>

typedef struct abi_canary_options {
  uint32_t struct_size;
#ifdef ABI_CANARY_V2
  int32_t flags; /* moves every later field */
#endif
  int32_t mode;
  int64_t timeout_ms;
} abi_canary_options_t;

__attribute__((visibility("default"))) int abi_canary_run(const abi_canary_options_t* options);
#ifndef ABI_CANARY_V2
__attribute__((visibility("default"))) int abi_canary_stop(void);
#endif

#endif /* ABI_CANARY_H_ */
