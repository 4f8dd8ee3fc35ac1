// load_backend against the mock plugin variants (mock_plugin.cc): each broken variant is
// rejected with its own status and a message naming the file and the reason; the good one
// loads, is shared while referenced and unloaded after; names resolve through
// PROCGROUP_PLUGIN_PATH. Every test restores the environment and cwd it changes, so the
// binary also passes when run as one process.
#include "loader/loader.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace procgroup::detail {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// What the plugins' host->log calls said, for checking that in->host reached them.
std::mutex g_log_mutex;
std::vector<std::string> g_log_lines;

void host_log(void*, int32_t level, const char* backend, const char* message) {
  std::lock_guard lock(g_log_mutex);
  g_log_lines.push_back(std::to_string(level) + " " + backend + " " + message);
}
// As the core's host does: the message becomes this thread's last error.
void host_set_error(void*, const char* message) { set_last_error(message); }

const pg_host_services_t kHost = {sizeof(pg_host_services_t), 0, nullptr, host_log, host_set_error,
                                  nullptr, nullptr, nullptr};

std::string real(const std::string& path) { return fs::canonical(path).string(); }

// dlopen(RTLD_NOLOAD) finds a library only while it is loaded; the probe's own reference
// is dropped again at once.
bool is_loaded(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("PROCGROUP_PLUGIN_PATH")) saved_path_ = v;
    saved_cwd_ = fs::current_path();
    char pattern[] = "/tmp/pg_loader_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    temp_dir_ = pattern;
  }
  void TearDown() override {
    if (saved_path_) {
      setenv("PROCGROUP_PLUGIN_PATH", saved_path_->c_str(), 1);
    } else {
      unsetenv("PROCGROUP_PLUGIN_PATH");
    }
    fs::current_path(saved_cwd_);
    fs::remove_all(temp_dir_);
  }

  // Expects loading value to fail with code and a message holding every piece of needles.
  void expect_rejected(const std::string& value, pg_status_t code,
                       const std::vector<std::string>& needles) {
    Result<PluginRef> r = load_backend(value, &kHost);
    ASSERT_FALSE(r.ok()) << value << " loaded";
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    for (const std::string& needle : needles) EXPECT_THAT(r.status().message(), HasSubstr(needle));
  }

  std::optional<std::string> saved_path_;
  fs::path saved_cwd_;
  fs::path temp_dir_;
};

TEST_F(LoaderTest, GoodPluginLoadsWithItsNegotiatedFields) {
  {
    std::lock_guard lock(g_log_mutex);
    g_log_lines.clear();
  }
  Result<PluginRef> r = load_backend(MOCK_PLUGIN_GOOD, &kHost);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Plugin& p = **r;
  EXPECT_EQ(p.name, "mock_good");
  EXPECT_EQ(p.path, real(MOCK_PLUGIN_GOOD));
  EXPECT_EQ(p.description, "loader test mock mock_good");
  EXPECT_EQ(p.version, 1u);
  EXPECT_EQ(p.native_ops, (1u << PG_OP_COUNT_) - 1);
  EXPECT_EQ(p.native_dtypes, (1u << PG_DTYPE_F32) | (1u << PG_DTYPE_F64));
  EXPECT_EQ(p.native_reduce_ops, 1u << PG_REDUCE_SUM);
  EXPECT_EQ(p.devices, 1u << PG_DEVICE_CPU);
  ASSERT_NE(p.ops, nullptr);
  EXPECT_NE(p.handle, nullptr);
  std::lock_guard lock(g_log_mutex);
  EXPECT_EQ(g_log_lines, std::vector<std::string>{"2 mock_good negotiated"});
}

TEST_F(LoaderTest, GoodPluginTableIsCallableAcrossTheBoundary) {
  Result<PluginRef> r = load_backend(MOCK_PLUGIN_GOOD, &kHost);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const pg_backend_ops_t& ops = *(*r)->ops;
  pg_backend_group_config_t config{};
  config.struct_size = sizeof(config);
  config.size = 1;
  config.timeout_ms = 1000;
  pg_backend_group_t group = nullptr;
  ASSERT_EQ(ops.group_create(&config, &group), PG_OK);

  float in[3] = {1, 2, 3};
  float out[3] = {};
  pg_backend_op_t op{};
  op.struct_size = sizeof(op);
  op.op = PG_OP_ALLREDUCE;
  op.input = {sizeof(pg_buffer_t), PG_DTYPE_F32, in, 3, PG_DEVICE_CPU, 0, nullptr};
  op.output = {sizeof(pg_buffer_t), PG_DTYPE_F32, out, 3, PG_DEVICE_CPU, 0, nullptr};
  pg_backend_work_t work = nullptr;
  ASSERT_EQ(ops.allreduce(group, &op, &work), PG_OK);
  EXPECT_EQ(ops.work_wait(work, 1000), PG_OK);
  ops.work_release(work);
  EXPECT_EQ(out[2], 3.0f);

  ASSERT_EQ(ops.group_abort(group), PG_OK);
  ASSERT_EQ(ops.barrier(group, &op, &work), PG_OK);
  EXPECT_EQ(ops.work_test(work), PG_ERR_ABORTED);
  ops.work_release(work);
  EXPECT_EQ(ops.group_destroy(group), PG_OK);
}

TEST_F(LoaderTest, MissingFileIsNotFound) {
  const std::string path = (temp_dir_ / "libprocgroup-absent.so").string();
  expect_rejected(path, PG_ERR_BACKEND_NOT_FOUND, {path, "no such file"});
}

TEST_F(LoaderTest, FileThatIsNotALibraryFailsInDlopen) {
  const std::string path = (temp_dir_ / "libprocgroup-text.so").string();
  std::ofstream(path) << "not an ELF file\n";
  expect_rejected(path, PG_ERR_BACKEND_NOT_FOUND, {path, "dlopen: "});
}

TEST_F(LoaderTest, MissingSymbolIsNotFound) {
  expect_rejected(MOCK_PLUGIN_NO_SYMBOL, PG_ERR_BACKEND_NOT_FOUND,
                  {MOCK_PLUGIN_NO_SYMBOL, "no exported pg_backend_negotiate"});
}

TEST_F(LoaderTest, PluginNeedingANewerInterfaceIsAbiMismatch) {
  expect_rejected(MOCK_PLUGIN_VERSION_TOO_NEW, PG_ERR_ABI_MISMATCH,
                  {MOCK_PLUGIN_VERSION_TOO_NEW, "refused the interface versions 1..1",
                   "mock: needs interface 2..3"});
}

TEST_F(LoaderTest, VersionBelowTheRangeIsAbiMismatch) {
  expect_rejected(MOCK_PLUGIN_VERSION_TOO_OLD, PG_ERR_ABI_MISMATCH,
                  {MOCK_PLUGIN_VERSION_TOO_OLD, "interface version 0, outside the range 1..1"});
}

TEST_F(LoaderTest, TableTooSmallIsAbiMismatch) {
  expect_rejected(
      MOCK_PLUGIN_TABLE_TOO_SMALL, PG_ERR_ABI_MISMATCH,
      {MOCK_PLUGIN_TABLE_TOO_SMALL,
       "function table is " + std::to_string(offsetof(pg_backend_ops_t, send)) + " bytes",
       "at least " + std::to_string(PG_BACKEND_OPS_V1_SIZE)});
}

TEST_F(LoaderTest, NullRequiredEntryIsBackendError) {
  expect_rejected(MOCK_PLUGIN_NULL_WORK_WAIT, PG_ERR_BACKEND,
                  {MOCK_PLUGIN_NULL_WORK_WAIT, "required table entry work_wait is NULL"});
}

TEST_F(LoaderTest, NegotiateErrorCarriesThePluginsMessage) {
  set_last_error("the caller's own error");
  expect_rejected(MOCK_PLUGIN_NEGOTIATE_ERROR, PG_ERR_BACKEND,
                  {MOCK_PLUGIN_NEGOTIATE_ERROR, "failed with PG_ERR_UNSUPPORTED",
                   "mock: no usable device on this host"});
  // The plugin's set_error went through the thread's last error; the caller's is back.
  EXPECT_STREQ(last_error(), "the caller's own error");
}

TEST_F(LoaderTest, NegotiateThatThrowsIsBackendError) {
  expect_rejected(
      MOCK_PLUGIN_NEGOTIATE_THROWS, PG_ERR_BACKEND,
      {MOCK_PLUGIN_NEGOTIATE_THROWS, "threw an exception", "mock: negotiate threw on purpose"});
}

TEST_F(LoaderTest, RejectedPluginsAreUnloaded) {
  for (const char* path :
       {MOCK_PLUGIN_NO_SYMBOL, MOCK_PLUGIN_VERSION_TOO_NEW, MOCK_PLUGIN_VERSION_TOO_OLD,
        MOCK_PLUGIN_TABLE_TOO_SMALL, MOCK_PLUGIN_NULL_WORK_WAIT, MOCK_PLUGIN_NEGOTIATE_ERROR,
        MOCK_PLUGIN_NEGOTIATE_THROWS}) {
    EXPECT_FALSE(load_backend(path, &kHost).ok()) << path;
    EXPECT_FALSE(is_loaded(path)) << path << " is still loaded after its rejection";
  }
}

TEST_F(LoaderTest, ThrowsInCreateNegotiatesButItsCreateThrows) {
  Result<PluginRef> r = load_backend(MOCK_PLUGIN_THROWS_IN_CREATE, &kHost);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  pg_backend_group_config_t config{};
  config.struct_size = sizeof(config);
  config.size = 1;
  pg_backend_group_t group = nullptr;
  EXPECT_THROW((*r)->ops->group_create(&config, &group), std::runtime_error);
}

TEST_F(LoaderTest, SendRecvOnlyPluginIsComplete) {
  Result<PluginRef> r = load_backend(MOCK_PLUGIN_P2P_ONLY, &kHost);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->native_ops, (1u << PG_OP_SEND) | (1u << PG_OP_RECV));
  EXPECT_EQ((*r)->ops->allreduce, nullptr);
}

TEST_F(LoaderTest, SameFileIsSharedAndClosedWithTheLastReference) {
  const std::string path = MOCK_PLUGIN_GOOD;
  Result<PluginRef> first = load_backend(path, &kHost);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  Result<PluginRef> second = load_backend(path, &kHost);
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(first->use_count(), 2);
  EXPECT_TRUE(is_loaded(path));

  first->reset();
  EXPECT_TRUE(is_loaded(path)) << "closed while a reference remains";
  second->reset();
  EXPECT_FALSE(is_loaded(path)) << "still loaded after the last reference went";

  // A later load negotiates afresh and works.
  Result<PluginRef> again = load_backend(path, &kHost);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ((*again)->name, "mock_good");
}

TEST_F(LoaderTest, ConcurrentLoadsShareOnePlugin) {
  constexpr int kThreads = 8;
  std::vector<PluginRef> refs(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&refs, i] {
      Result<PluginRef> r = load_backend(MOCK_PLUGIN_GOOD, &kHost);
      if (r.ok()) refs[i] = *r;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const PluginRef& ref : refs) {
    ASSERT_NE(ref, nullptr);
    EXPECT_EQ(ref.get(), refs[0].get());
  }
  refs.clear();
  EXPECT_FALSE(is_loaded(MOCK_PLUGIN_GOOD));
}

TEST_F(LoaderTest, RelativePathIsRelativeToTheWorkingDirectory) {
  fs::current_path(fs::path(MOCK_PLUGIN_GOOD).parent_path());
  const std::string file = fs::path(MOCK_PLUGIN_GOOD).filename().string();
  Result<PluginRef> r = load_backend(file, &kHost);  // no '/': dlopen alone would not look here
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->path, real(MOCK_PLUGIN_GOOD));
}

TEST_F(LoaderTest, CandidatesFollowThePluginPathThenTheLibraryDirectory) {
  setenv("PROCGROUP_PLUGIN_PATH", "/a::/b/:", 1);
  const std::string beside_self =
      (fs::canonical("/proc/self/exe").parent_path() / "procgroup/libprocgroup-x.so").string();
  EXPECT_EQ(
      plugin_candidates("x"),
      (std::vector<std::string>{"/a/libprocgroup-x.so", "/b/libprocgroup-x.so", beside_self}));
  unsetenv("PROCGROUP_PLUGIN_PATH");
  EXPECT_EQ(plugin_candidates("x"), std::vector<std::string>{beside_self});
}

TEST_F(LoaderTest, NameIsFoundThroughThePluginPath) {
  const std::string path =
      std::string("::") + (temp_dir_ / "empty").string() + ":" + MOCK_PLUGIN_DIR + ":";
  setenv("PROCGROUP_PLUGIN_PATH", path.c_str(), 1);
  Result<PluginRef> by_name = load_backend("mock_good", &kHost);
  ASSERT_TRUE(by_name.ok()) << by_name.status().to_string();
  EXPECT_EQ((*by_name)->path, real(MOCK_PLUGIN_GOOD));
  Result<PluginRef> by_path = load_backend(MOCK_PLUGIN_GOOD, &kHost);
  ASSERT_TRUE(by_path.ok());
  EXPECT_EQ(by_name->get(), by_path->get());
}

TEST_F(LoaderTest, TwoNamesForOneFileShareOnePlugin) {
  fs::create_symlink(MOCK_PLUGIN_GOOD, temp_dir_ / "libprocgroup-alias.so");
  setenv("PROCGROUP_PLUGIN_PATH", temp_dir_.c_str(), 1);
  Result<PluginRef> alias = load_backend("alias", &kHost);
  ASSERT_TRUE(alias.ok()) << alias.status().to_string();
  Result<PluginRef> direct = load_backend(MOCK_PLUGIN_GOOD, &kHost);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(alias->get(), direct->get());
  EXPECT_EQ((*alias)->name, "mock_good");  // the negotiated name, not the file's
}

TEST_F(LoaderTest, LaterCandidateIsUsedWhenAnEarlierOneIsBroken) {
  fs::create_directory(temp_dir_ / "broken");
  fs::create_symlink(MOCK_PLUGIN_TABLE_TOO_SMALL, temp_dir_ / "broken/libprocgroup-mock_good.so");
  const std::string path = (temp_dir_ / "broken").string() + ":" + MOCK_PLUGIN_DIR;
  setenv("PROCGROUP_PLUGIN_PATH", path.c_str(), 1);
  Result<PluginRef> r = load_backend("mock_good", &kHost);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->path, real(MOCK_PLUGIN_GOOD));
}

TEST_F(LoaderTest, UnknownNameListsEveryCandidateTried) {
  const std::string path = (temp_dir_ / "one").string() + ":" + (temp_dir_ / "two").string();
  setenv("PROCGROUP_PLUGIN_PATH", path.c_str(), 1);
  const std::vector<std::string> candidates = plugin_candidates("nosuch");
  ASSERT_EQ(candidates.size(), 3u);
  std::vector<std::string> needles = {"backend 'nosuch' not found", "PROCGROUP_PLUGIN_PATH"};
  for (const std::string& c : candidates) needles.push_back(c + " (no such file)");
  expect_rejected("nosuch", PG_ERR_BACKEND_NOT_FOUND, needles);
}

TEST_F(LoaderTest, UnknownNameListsTheBackendsTheSearchPathOffers) {
  fs::create_symlink(MOCK_PLUGIN_GOOD, temp_dir_ / "libprocgroup-zz_extra.so");
  std::ofstream(temp_dir_ / "libprocgroup-Not-A-Name.so") << "x";  // not offered: bad name
  std::ofstream(temp_dir_ / "unrelated.so") << "x";
  const std::string path = temp_dir_.string() + ":" + MOCK_PLUGIN_DIR + ":/no/such/dir";
  setenv("PROCGROUP_PLUGIN_PATH", path.c_str(), 1);
  const std::vector<std::string> available = available_backends();
  EXPECT_THAT(available, ::testing::IsSupersetOf({"mock_good", "mock_no_symbol", "zz_extra"}));
  EXPECT_THAT(available, ::testing::Not(::testing::Contains("Not-A-Name")));
  EXPECT_TRUE(std::is_sorted(available.begin(), available.end()));
  expect_rejected("nosuch", PG_ERR_BACKEND_NOT_FOUND,
                  {"backend 'nosuch' not found; available: ", "mock_good, ", "zz_extra"});
}

TEST_F(LoaderTest, NameWhoseOnlyFileIsBrokenReportsWhyNotNotFound) {
  setenv("PROCGROUP_PLUGIN_PATH", MOCK_PLUGIN_DIR, 1);
  expect_rejected(
      "mock_table_too_small", PG_ERR_ABI_MISMATCH,
      {"could not be loaded",
       std::string(MOCK_PLUGIN_DIR) + "/libprocgroup-mock_table_too_small.so (function table is"});
}

TEST_F(LoaderTest, MalformedNameIsInvalidArgument) {
  for (const std::string& value :
       std::vector<std::string>{"", "Gloo", "gl-oo", "gloo.", std::string(65, 'a')}) {
    expect_rejected(value, PG_ERR_INVALID_ARGUMENT, {"backend '" + value + "' is neither"});
  }
  // Exactly 64 characters is a name: it is searched for, and simply not found.
  expect_rejected(std::string(64, 'a'), PG_ERR_BACKEND_NOT_FOUND, {"not found"});
}

TEST_F(LoaderTest, MissingHostIsInvalidArgument) {
  Result<PluginRef> r = load_backend(MOCK_PLUGIN_GOOD, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), PG_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace procgroup::detail
