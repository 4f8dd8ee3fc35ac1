// Compiled as C++17 by the wrapper_cxx17_error test, which expects procgroup.hpp's own
// message (use C++20 or procgroup.h) and none of the errors of a header that went further.
#include <procgroup/procgroup.hpp>

int main() { return 0; }
