// ucx_test_support.h — the ucx plugin's direct tests: ranks as forked processes
// (plugin_harness.h) that load the ucx plugin with this test's host, whose reduce, reduce_to
// and scale_down are the core's kernels (the plugin has none of its own).
//
//   run_world(3, {}, [](RankEnv& r) {
//     float x[4] = {1, 2, 3, 4};
//     pg_buffer_t b = cpu(x, 4, PG_DTYPE_F32);
//     r.expect(r.run(make_op(PG_OP_ALLREDUCE, b, b)) == PG_OK, "allreduce");
//   });   // a gtest failure unless every child exits cleanly within the limit
#pragma once

#include <cstdint>
#include <functional>

#include "plugin_harness.h"

namespace procgroup::ucx_test {

// The harness, bound to the ucx plugin so that no test has to name it.
using plugin_harness::absent, plugin_harness::cpu, plugin_harness::make_op, plugin_harness::OpArgs;
using plugin_harness::create_group, plugin_harness::FileStore, plugin_harness::RankEnv;
using plugin_harness::status_name, plugin_harness::take_error, plugin_harness::Work;
using plugin_harness::WorldOptions;

const plugin_harness::PluginUnderTest& ucx_plugin();

using plugin_harness::host_with_core_kernels;

class Plugin : public plugin_harness::Plugin {
 public:
  explicit Plugin(uint32_t min_version = 1, uint32_t max_version = 1)
      : plugin_harness::Plugin(ucx_plugin(), min_version, max_version) {}
};

inline void run_world(int size, const WorldOptions& options,
                      const std::function<void(RankEnv&)>& body) {
  plugin_harness::run_world(ucx_plugin(), size, options, body);
}

// CPU time this process has used, in seconds (every thread).
double process_cpu_seconds();

}  // namespace procgroup::ucx_test
