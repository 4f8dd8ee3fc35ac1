// A first procgroup program: every rank contributes its rank number, allreduce sums
// them, and each rank checks the result. Launch with pgrun, torchrun --no-python,
// mpirun or srun:
//
//   pgrun --nproc-per-node 2 allreduce_demo [elements]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "procgroup/procgroup.hpp"

int main(int argc, char** argv) {
  try {
    const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1 << 20;
    procgroup::Group group = procgroup::Group::from_env();
    const int rank = group.rank(), size = group.size();
    std::vector<float> data(n, static_cast<float>(rank));
    group.allreduce(std::span(data)).wait();
    const float want = size * (size - 1) / 2.0f;
    size_t wrong = 0;
    for (float v : data) wrong += v != want;
    group.barrier().wait();
    std::printf("rank %d of %d on %s: allreduce of %zu floats = %g (%s)\n", rank, size,
                group.backend().data(), n, data.empty() ? want : data[0],
                wrong == 0 ? "correct" : "WRONG");
    group.destroy();
    return wrong == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_demo: %s\n", e.what());
    return 1;
  }
}
