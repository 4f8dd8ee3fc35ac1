// Links procgroup::ddp from the installed package, as a CPU-only program: a Reducer step on a
// one-rank loopback group (which pulls in ddp's device dispatch, and with it the CUDA
// runtime calls of a CUDA build) and the sampler. It must run on a machine without CUDA and
// must not NEED libcudart (install_test.cmake checks the binary).
#include <procgroup/ddp/reducer.h>
#include <procgroup/ddp/sampler.h>

#include <cstdio>
#include <exception>
#include <vector>

namespace ddp = procgroup::ddp;

int main() {
  try {
    pg_group_options_t options = PG_GROUP_OPTIONS_INIT;
    options.size = 1;
    options.backend = "loopback";
    procgroup::Group group(options);
    std::vector<float> w(5, 1.0f), gw(5, 0.5f), b(3, 2.0f), gb(3, 0.25f);
    ddp::Reducer reducer(group, {ddp::Parameter::of("w", std::span(w), std::span(gw)),
                                 ddp::Parameter::of("b", std::span(b), std::span(gb))});
    reducer.mark_grad_ready(1);
    reducer.mark_grad_ready(0);
    reducer.finalize();  // the mean over one rank: unchanged
    const bool grads_ok = gw[4] == 0.5f && gb[2] == 0.25f;

    ddp::DistributedSampler sampler(10, 2, 1, {.shuffle = true, .seed = 7});
    const auto indices = sampler.indices(3);
    std::printf("ddp consumer: %zu samples, reducer %s\n", indices.size(),
                grads_ok ? "ok" : "WRONG");
    return indices.size() == 5 && grads_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp consumer: %s\n", e.what());
    return 1;
  }
}
