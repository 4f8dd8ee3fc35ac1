/* Functions the C translation units of this directory define and abi_layout_test.cc calls,
 * so that what the C compiler made of the public headers is checked at run time. */
#ifndef PROCGROUP_TESTS_ABI_ABI_C_CHECKS_H_
#define PROCGROUP_TESTS_ABI_ABI_C_CHECKS_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Each returns the number of failed checks (0: all passed) and prints what failed. */
int abi_c_procgroup_alone(void);
int abi_c_backend_alone(void);
int abi_c_user_then_backend(void);
int abi_c_backend_then_user(void);

/* sizeof of each ABI struct as the C compiler sees it, for comparison with C++. */
typedef struct abi_c_size {
  const char* type;
  size_t size;
} abi_c_size_t;
const abi_c_size_t* abi_c_sizes(size_t* count);

#ifdef __cplusplus
}
#endif

#endif /* PROCGROUP_TESTS_ABI_ABI_C_CHECKS_H_ */
