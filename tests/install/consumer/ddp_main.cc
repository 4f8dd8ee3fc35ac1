// Links procgroup::ddp from the installed package: its headers and static library.
#include <procgroup/ddp/sampler.h>

#include <cstdio>

int main() {
  procgroup::ddp::DistributedSampler sampler(10, 2, 1, {.shuffle = true, .seed = 7});
  const auto indices = sampler.indices(3);
  std::printf("ddp consumer: %zu samples\n", indices.size());
  return indices.size() == 5 ? 0 : 1;
}
