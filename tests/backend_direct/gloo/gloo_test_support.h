// gloo_test_support.h — the gloo plugin's direct tests: ranks as real processes
// (plugin_harness.h) that load the gloo plugin with this test's host, whose scale_down
// handles every dtype (gloo scales AVG through the host) and whose reduce must never be
// called. Also independent f16/bf16 encodings for the references.
//
//   run_world(3, {}, [](RankEnv& r) {
//     float x[4] = {1, 2, 3, 4};
//     pg_buffer_t b = cpu(x, 4, PG_DTYPE_F32);
//     r.expect(r.run(make_op(PG_OP_ALLREDUCE, b, b)) == PG_OK, "allreduce");
//   });                                 // gtest failure unless every child exits cleanly
#pragma once

#include <cstdint>
#include <functional>

#include "plugin_harness.h"
#include "procgroup/procgroup_backend.h"

namespace procgroup::gloo_test {

// The harness, bound to the gloo plugin so that no test has to name it.
using plugin_harness::absent, plugin_harness::cpu, plugin_harness::make_op, plugin_harness::OpArgs;
using plugin_harness::create_group, plugin_harness::FileStore, plugin_harness::RankEnv;
using plugin_harness::logged, plugin_harness::take_error, plugin_harness::Work;
using plugin_harness::WorldOptions;

// ---- The gloo plugin under its test host ---------------------------------------------------

const plugin_harness::PluginUnderTest& gloo_plugin();

class Plugin : public plugin_harness::Plugin {
 public:
  explicit Plugin(uint32_t min_version = 1, uint32_t max_version = 1)
      : plugin_harness::Plugin(gloo_plugin(), min_version, max_version) {}
};

inline void run_world(int size, const WorldOptions& options,
                      const std::function<void(RankEnv&)>& body) {
  plugin_harness::run_world(gloo_plugin(), size, options, body);
}

// ---- Numeric references ----------------------------------------------------------------------

// IEEE half / bfloat16 encodings, written independently of the plugin: round to nearest
// even, subnormals kept, overflow to infinity.
uint16_t to_f16(double value);
uint16_t to_bf16(double value);
double from_f16(uint16_t bits);
double from_bf16(uint16_t bits);

// What the test host's scale_down does to one element of dtype (stored as a double).
double host_scale(double value, pg_dtype_t dtype, uint64_t divisor);

}  // namespace procgroup::gloo_test
