// pgrun: starts the local ranks of a procgroup (or any env:// torchrun-style) program. See
// options.cc for the command line and launcher.h for the supervision policy.
#include <cstdio>
#include <exception>

#include "free_port.h"
#include "launcher.h"
#include "options.h"

int main(int argc, char** argv) {
  namespace pgrun = procgroup::pgrun;
  try {
    pgrun::ParsedOptions parsed = pgrun::parse_options(argc, argv);
    if (!parsed.run) return parsed.exit_code;
    int master_port = parsed.options.master_port.value_or(0);
    if (master_port == 0) {
      const pgrun::FreePort port = pgrun::pick_free_port();
      if (port.port == 0) {
        std::fprintf(stderr, "pgrun: cannot pick a free MASTER_PORT (%s); pass --master-port\n",
                     port.error.c_str());
        return 1;
      }
      master_port = port.port;
    }
    return pgrun::launch(parsed.options, master_port);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pgrun: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "pgrun: internal error\n");
  }
  return 1;
}
