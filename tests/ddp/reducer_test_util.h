// Shared pieces of the Reducer feature tests: a probe hook that records when each bucket's
// reduction starts, and deterministic per-rank gradient values.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "procgroup/ddp/comm_hook.h"
#include "procgroup/ddp/reducer.h"

namespace procgroup::ddp::testing {

// A user hook (through the public interface) around the default allreduce: records each
// start together with the caller's count of gradients marked so far.
class ProbeHook : public CommHook {
 public:
  struct Start {
    size_t bucket;
    int marked_before;
  };
  explicit ProbeHook(const int* marked) : marked_(marked) {}
  std::string_view name() const override { return "probe"; }
  std::unique_ptr<HookWork> start(const Group& group, const GradBucket& bucket) override {
    starts.push_back({bucket.index, marked_ ? *marked_ : -1});
    auto work = allreduce_hook()->start(group, bucket);
    works.push_back(dynamic_cast<WorkHookWork*>(work.get()));
    return work;
  }
  // Polls the reduction of the n-th started bucket until it completes (or 10 s pass).
  bool completes(size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (works.at(n)->work().test()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  std::vector<Start> starts;
  std::vector<WorkHookWork*> works;

 private:
  const int* marked_;
};

// A gradient value distinct per (rank, parameter, element), exactly representable.
inline float grad_value(int rank, size_t param, size_t i) {
  return static_cast<float>((rank + 1) * 0.25 + static_cast<double>(param) * 8 +
                            static_cast<double>(i % 13) * 0.5);
}

// n float parameters of the given sizes, with owned values and gradients.
struct FloatParams {
  explicit FloatParams(const std::vector<size_t>& sizes) {
    for (size_t s : sizes) {
      values.emplace_back(s, 1.0f);
      grads.emplace_back(s, 0.0f);
    }
  }
  std::vector<Parameter> parameters() {
    std::vector<Parameter> out;
    for (size_t k = 0; k < values.size(); ++k) {
      out.push_back(
          Parameter::of("p" + std::to_string(k), std::span(values[k]), std::span(grads[k])));
    }
    return out;
  }
  std::vector<std::vector<float>> values, grads;
};

}  // namespace procgroup::ddp::testing
