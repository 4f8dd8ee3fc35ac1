/* Built twice, as version 1 and (with ABI_CANARY_V2) version 2 of abi_canary.h. */
#include "abi_canary.h"

int abi_canary_run(const abi_canary_options_t* options) {
  return options->mode + (int)options->timeout_ms;
}

#ifndef ABI_CANARY_V2
int abi_canary_stop(void) { return 0; }
#endif
