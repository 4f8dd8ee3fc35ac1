// The negotiation contract (docs/backend-interface.md, policy table), checked on every
// plugin this build produces: each libprocgroup-*.so in lib/procgroup (found at run time,
// so a new backend is covered without editing this file) plus the example plugin and the
// one built from the frozen v1 header. Each is dlopen'ed and its pg_backend_negotiate
// called directly, as a core of another version would:
// - a newer core's larger out struct: the plugin fills its version's fields and leaves
//   the rest (and struct_size) alone;
// - a core that offers only versions the plugin does not speak: PG_ERR_ABI_MISMATCH with a
//   message through set_error, and no function table;
// - an out struct smaller than version 1's (no real core has one): nothing past
//   struct_size is written.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "../support/negotiate_out_buffer.h"
#include "procgroup/procgroup_backend.h"

namespace {

thread_local std::string t_error;

void host_set_error(void*, const char* message) { t_error = message != nullptr ? message : ""; }
void host_log(void*, int32_t, const char*, const char*) {}
pg_status_t host_reduce(void*, void*, const void*, uint64_t, pg_dtype_t, pg_reduce_op_t) {
  return PG_ERR_UNSUPPORTED;  // negotiate must not compute anything
}
pg_status_t host_scale_down(void*, void*, uint64_t, pg_dtype_t, uint64_t) {
  return PG_ERR_UNSUPPORTED;
}
const pg_host_services_t kHost = {sizeof(pg_host_services_t), 0, nullptr, host_log, host_set_error,
                                  host_reduce, host_scale_down, nullptr};

std::vector<std::string> plugins() {
  std::set<std::string> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(PG_PLUGIN_DIR, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("libprocgroup-", 0) == 0 && entry.path().extension() == ".so")
      found.insert(entry.path().string());
  }
  const std::string extra = PG_EXTRA_PLUGINS;  // comma-separated
  for (size_t at = 0; at < extra.size();) {
    size_t end = extra.find(',', at);
    if (end == std::string::npos) end = extra.size();
    if (end > at) found.insert(extra.substr(at, end - at));
    at = end + 1;
  }
  return {found.begin(), found.end()};
}

class Library {
 public:
  explicit Library(const std::string& path) : handle_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ != nullptr)
      negotiate_ =
          reinterpret_cast<pg_backend_negotiate_fn>(dlsym(handle_, "pg_backend_negotiate"));
  }
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  pg_backend_negotiate_fn negotiate() const { return negotiate_; }

 private:
  void* handle_;
  pg_backend_negotiate_fn negotiate_ = nullptr;
};

pg_backend_negotiate_in_t offer(uint32_t min_version, uint32_t max_version) {
  return {sizeof(pg_backend_negotiate_in_t), min_version, max_version, 0, &kHost};
}

constexpr size_t kOutV1 = offsetof(pg_backend_negotiate_out_t, ops) + sizeof(void*);

TEST(NegotiateContract, EveryPluginIsFound) {
  // lib/procgroup always holds loopback; the extras are this directory's own plugins.
  const std::vector<std::string> all = plugins();
  EXPECT_GE(all.size(), 3u);
  for (const std::string& path : all) {
    Library lib(path);
    EXPECT_NE(lib.negotiate(), nullptr) << path << ": " << dlerror();
  }
}

TEST(NegotiateContract, ANewerCoresLargerOutStructKeepsItsTail) {
  for (const std::string& path : plugins()) {
    Library lib(path);
    if (lib.negotiate() == nullptr) continue;
    const size_t size = sizeof(pg_backend_negotiate_out_t) + 64;
    OutBuffer out(size, static_cast<uint32_t>(size));
    pg_backend_negotiate_in_t in = offer(1, PG_BACKEND_INTERFACE_VERSION + 5);
    ASSERT_EQ(lib.negotiate()(&in, out.get()), PG_OK) << path << ": " << t_error;
    EXPECT_GE(out.get()->version, 1u) << path;
    EXPECT_LE(out.get()->version, PG_BACKEND_INTERFACE_VERSION) << path;
    EXPECT_EQ(out.get()->struct_size, size) << path << " changed out->struct_size";
    ASSERT_NE(out.get()->name, nullptr) << path;
    ASSERT_NE(out.get()->ops, nullptr) << path;
    EXPECT_GE(out.get()->ops->struct_size, PG_BACKEND_OPS_V1_SIZE) << path;
    EXPECT_TRUE(out.untouched_from(sizeof(pg_backend_negotiate_out_t)))
        << path << " wrote past the version-1 fields of a larger out struct";
  }
}

TEST(NegotiateContract, VersionsItDoesNotSpeakAreRefusedWithAReason) {
  for (const std::string& path : plugins()) {
    Library lib(path);
    if (lib.negotiate() == nullptr) continue;
    OutBuffer out(sizeof(pg_backend_negotiate_out_t), sizeof(pg_backend_negotiate_out_t));
    pg_backend_negotiate_in_t in =
        offer(PG_BACKEND_INTERFACE_VERSION + 1, PG_BACKEND_INTERFACE_VERSION + 3);
    t_error.clear();
    EXPECT_EQ(lib.negotiate()(&in, out.get()), PG_ERR_ABI_MISMATCH) << path;
    EXPECT_FALSE(t_error.empty()) << path << " refused without calling set_error";
    EXPECT_EQ(out.get()->ops, nullptr) << path << " handed out a table while refusing";
  }
}

TEST(NegotiateContract, NothingIsWrittenPastASmallOutStruct) {
  for (const std::string& path : plugins()) {
    Library lib(path);
    if (lib.negotiate() == nullptr) continue;
    const uint32_t declared = static_cast<uint32_t>(kOutV1 - sizeof(void*));  // no room for ops
    OutBuffer out(sizeof(pg_backend_negotiate_out_t) + 16, declared);
    pg_backend_negotiate_in_t in = offer(1, 1);
    lib.negotiate()(&in, out.get());  // refusing is recommended, not required
    EXPECT_TRUE(out.untouched_from(declared)) << path << " wrote past out->struct_size";
  }
}

}  // namespace
