// The backend kit's entry half (status.hpp, negotiate.hpp, entry.hpp) on a fake group class:
// the firewall turns exceptions into statuses with a message, negotiate fills only what
// fits and refuses hosts too short for the plugin, make_ops builds the table the group
// class asks for and its entries check handles before the group sees them.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../support/negotiate_out_buffer.h"
#include "procgroup/procgroup_backend_kit.hpp"

namespace procgroup::kit {
namespace {

thread_local std::string t_error;
thread_local int t_errors = 0;

void host_set_error(void*, const char* message) {
  t_error = message;
  ++t_errors;
}
pg_status_t host_reduce(void*, void*, const void*, uint64_t, pg_dtype_t, pg_reduce_op_t) {
  return PG_OK;
}
pg_status_t host_scale_down(void*, void*, uint64_t, pg_dtype_t, uint64_t) { return PG_OK; }
pg_host_services_t make_host() {
  pg_host_services_t host{};
  host.struct_size = sizeof(host);
  host.set_error = host_set_error;
  host.reduce = host_reduce;
  host.scale_down = host_scale_down;
  return host;
}
const pg_host_services_t kHost = make_host();
const pg_host_services_t kNegotiatedHost = make_host();  // another table, the same functions

std::string take_error() {
  std::string e = std::move(t_error);
  t_error.clear();
  return e;
}

TEST(KitStatus, FirewallTurnsExceptionsIntoStatusesWithAMessage) {
  EXPECT_EQ(firewall(&kHost, "mine: allreduce",
                     []() -> Status { throw std::runtime_error("index 7 out of range"); }),
            PG_ERR_INTERNAL);
  EXPECT_EQ(take_error(), "mine: allreduce: internal error: index 7 out of range");
  EXPECT_EQ(firewall(&kHost, "mine", []() -> Status { throw std::bad_alloc(); }),
            PG_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(take_error(), "mine: out of memory");
  EXPECT_EQ(firewall(&kHost, "mine", []() -> Status { throw 42; }), PG_ERR_INTERNAL);
  EXPECT_EQ(take_error(), "mine: internal error (unknown exception)");
  // A failed Status is reported as it is; success and PG_PENDING say nothing.
  t_errors = 0;
  EXPECT_EQ(firewall(&kHost, [] { return Status::error(PG_ERR_PEER_LOST, "rank 2 is gone"); }),
            PG_ERR_PEER_LOST);
  EXPECT_EQ(take_error(), "rank 2 is gone");
  EXPECT_EQ(firewall(&kHost, [] { return Status{PG_PENDING, ""}; }), PG_PENDING);
  EXPECT_EQ(firewall(&kHost, [] { return Status{}; }), PG_OK);
  EXPECT_EQ(t_errors, 1);
  // No host, or one too short for set_error: the code still comes back.
  EXPECT_EQ(firewall(nullptr, []() -> Status { throw std::logic_error("x"); }), PG_ERR_INTERNAL);
  pg_host_services_t short_host = kHost;
  short_host.struct_size = offsetof(pg_host_services_t, set_error);
  EXPECT_EQ(firewall(&short_host, [] { return Status::error(PG_ERR_TIMEOUT, "late"); }),
            PG_ERR_TIMEOUT);
  EXPECT_EQ(t_errors, 1);
}

Status step(pg_status_t code, int* reached) {
  ++*reached;
  return code == PG_OK ? Status{} : Status::error(code, "step failed");
}

Status two_steps(pg_status_t first, int* reached) {
  PG_KIT_TRY(step(first, reached));
  PG_KIT_TRY(step(PG_OK, reached));
  return {};
}

TEST(KitStatus, TryReturnsTheFirstFailure) {
  int reached = 0;
  EXPECT_TRUE(two_steps(PG_OK, &reached).ok());
  EXPECT_EQ(reached, 2);
  reached = 0;
  Status st = two_steps(PG_ERR_MISMATCH, &reached);
  EXPECT_EQ(st.code, PG_ERR_MISMATCH);
  EXPECT_EQ(st.message, "step failed");
  EXPECT_EQ(reached, 1);
}

// ---- A fake plugin -----------------------------------------------------------------

struct FakeWork {
  pg_status_t status = PG_OK;
  std::string message;
  int notices = 0;
  pg_status_t test(std::string* m) const {
    *m = message;
    return status;
  }
  pg_status_t wait(int64_t, std::string* m) const { return test(m); }
  bool notify_on_complete(pg_backend_work_done_fn done, void* user) {
    if (notices++ > 0) return false;
    done(user);
    return true;
  }
};

class FakeGroup {
 public:
  static constexpr const char* kName = "fake";
  static inline const pg_host_services_t* created_with = nullptr;
  static inline int shutdowns = 0;
  static Status create(const pg_backend_group_config_t&, const pg_host_services_t* host,
                       std::unique_ptr<FakeGroup>* out) {
    created_with = host;
    *out = std::make_unique<FakeGroup>();
    return {};
  }
  static inline pg_backend_op_t last_op{};
  Status submit(const pg_backend_op_t& op, std::shared_ptr<FakeWork>* out) {
    last_op = op;  // a whole struct, as plugins copy it
    if (op.op == PG_OP_BARRIER) throw std::runtime_error("barrier exploded");
    auto work = std::make_shared<FakeWork>();
    if (op.op == PG_OP_RECV) *work = FakeWork{PG_ERR_PEER_LOST, "fake: rank 1 is gone"};
    *out = work;
    return {};
  }
  void abort() {}
  void shutdown() { ++shutdowns; }
};

// A work that answers with a kit::Status (as nccl's do), and takes no completion notices.
struct StatusWork {
  Status test() const { return Status::error(PG_ERR_TIMEOUT, "splitting: too late"); }
  Status wait(int64_t) const { return Status{PG_PENDING, ""}; }
};

// Splits; its shutdown can fail, and its works are StatusWorks.
class SplittingGroup {
 public:
  static constexpr const char* kName = "splitting";
  static Status create(const pg_backend_group_config_t&, const pg_host_services_t*,
                       std::shared_ptr<SplittingGroup>* out) {
    *out = std::make_shared<SplittingGroup>();
    return {};
  }
  Status split(int32_t color, int32_t, const pg_backend_group_config_t*,
               std::shared_ptr<SplittingGroup>* out) {
    if (color != PG_SPLIT_NO_COLOR) *out = std::make_shared<SplittingGroup>();
    return {};
  }
  Status submit(const pg_backend_op_t&, std::shared_ptr<StatusWork>* out) {
    *out = std::make_shared<StatusWork>();
    return {};
  }
  void abort() {}
  Status shutdown() const {
    return fail_shutdown ? Status::error(PG_ERR_BACKEND, "splitting: teardown failed") : Status{};
  }
  static inline bool fail_shutdown = false;
};

constexpr pg_backend_ops_t kFakeOps = make_ops<FakeGroup>(kP2pOps | 1u << PG_OP_BARRIER);
constexpr pg_backend_ops_t kSplittingOps = make_ops<SplittingGroup>();

TEST(KitEntry, MakeOpsBuildsTheTableTheGroupAsksFor) {
  EXPECT_EQ(kFakeOps.struct_size, sizeof(pg_backend_ops_t));
  EXPECT_GE(kFakeOps.struct_size, PG_BACKEND_OPS_ON_COMPLETE_SIZE);
  EXPECT_EQ(native_ops_of(kFakeOps), kP2pOps | 1u << PG_OP_BARRIER);
  EXPECT_EQ(kFakeOps.allreduce, nullptr);
  EXPECT_NE(kFakeOps.send, nullptr);
  EXPECT_EQ(kFakeOps.group_split, nullptr) << "FakeGroup has no split";
  EXPECT_NE(kFakeOps.work_on_complete, nullptr);
  for (auto entry : {kFakeOps.group_create, kSplittingOps.group_create}) EXPECT_NE(entry, nullptr);
  EXPECT_EQ(native_ops_of(kSplittingOps), kAllOps);
  EXPECT_NE(kSplittingOps.group_split, nullptr);
  EXPECT_EQ(kSplittingOps.work_on_complete, nullptr) << "StatusWork takes no notices";
  constexpr pg_backend_ops_t kNoSplit = make_ops<SplittingGroup>(kAllOps, {.split = false});
  EXPECT_EQ(kNoSplit.group_split, nullptr);
}

class KitEntryGroup : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.struct_size = sizeof(store_);
    store_.set = [](void*, const char*, const void*, uint64_t) -> pg_status_t { return PG_OK; };
    store_.get = [](void*, const char*, int64_t, void**, uint64_t*) -> pg_status_t {
      return PG_OK;
    };
    store_.free_value = [](void*, void*) {};
    config_.struct_size = sizeof(config_);
    config_.size = 2;
    config_.timeout_ms = 1000;
    config_.store = &store_;
    config_.group_id = "g";
    config_.host = &kHost;
    // What the plugin keeps from negotiation: the host of a config without one.
    pg_backend_negotiate_in_t in{sizeof(in), 1, 1, 0, &kNegotiatedHost};
    pg_backend_negotiate_out_t out{};
    out.struct_size = sizeof(out);
    Offer offer{.name = "fake", .description = "", .ops = &kFakeOps};
    ASSERT_EQ(negotiate(&in, &out, offer), PG_OK);
  }
  pg_backend_op_t op(pg_op_t kind) const {
    pg_backend_op_t o{};
    o.struct_size = sizeof(o);
    o.op = kind;
    return o;
  }
  pg_host_store_t store_{};
  pg_backend_group_config_t config_{};
};

TEST_F(KitEntryGroup, EntriesCheckHandlesAndUseTheConfigsHost) {
  pg_backend_group_t g = nullptr;
  EXPECT_EQ(kFakeOps.group_create(nullptr, &g), PG_ERR_INVALID_ARGUMENT);
  config_.rank = 2;
  EXPECT_EQ(kFakeOps.group_create(&config_, &g), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(take_error(), "fake: group_create: rank 2 is not within a group of size 2");
  config_.rank = 0;
  config_.struct_size = PG_BACKEND_GROUP_CONFIG_V1_SIZE - 8;
  EXPECT_EQ(kFakeOps.group_create(&config_, &g), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(take_error(), "fake: group_create: config struct_size 48 is too small");
  // An older core's config ends before host: the negotiated host serves.
  config_.struct_size = PG_BACKEND_GROUP_CONFIG_V1_SIZE;
  ASSERT_EQ(kFakeOps.group_create(&config_, &g), PG_OK) << take_error();
  EXPECT_EQ(FakeGroup::created_with, &kNegotiatedHost);
  EXPECT_EQ(kFakeOps.group_destroy(g), PG_OK);
  // Today's config brings its own.
  config_.struct_size = sizeof(config_);
  ASSERT_EQ(kFakeOps.group_create(&config_, &g), PG_OK) << take_error();
  EXPECT_EQ(FakeGroup::created_with, &kHost);

  pg_backend_work_t w = nullptr;
  pg_backend_op_t send = op(PG_OP_SEND);
  EXPECT_EQ(kFakeOps.send(g, nullptr, &w), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(take_error(), "fake: send: group, op and work must not be NULL");
  pg_backend_op_t wrong = op(PG_OP_RECV);
  EXPECT_EQ(kFakeOps.send(g, &wrong, &w), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(take_error(), "fake: send entry called with op 10 (recv)");
  pg_backend_op_t small = send;
  small.struct_size = kOpV1Size - 1;
  EXPECT_EQ(kFakeOps.send(g, &small, &w), PG_ERR_INVALID_ARGUMENT);
  EXPECT_NE(take_error().find("op struct_size"), std::string::npos);
  // An older core's op, without the planned fields, and memory past it that is not ours:
  // the group sees them zero (and the short struct_size), never the bytes beyond.
  std::vector<unsigned char> bytes(sizeof(pg_backend_op_t), 0xAB);
  small.struct_size = kOpV1Size;
  std::memcpy(bytes.data(), &small, kOpV1Size);
  ASSERT_EQ(kFakeOps.send(g, reinterpret_cast<const pg_backend_op_t*>(bytes.data()), &w), PG_OK);
  EXPECT_EQ(FakeGroup::last_op.struct_size, kOpV1Size);
  EXPECT_EQ(FakeGroup::last_op.block_count, 0u);
  EXPECT_EQ(FakeGroup::last_op.in_place, 0u);
  kFakeOps.work_release(w);

  // A throwing group: the firewall answers, naming the plugin.
  pg_backend_op_t barrier = op(PG_OP_BARRIER);
  EXPECT_EQ(kFakeOps.barrier(g, &barrier, &w), PG_ERR_INTERNAL);
  EXPECT_EQ(take_error(), "fake: internal error: barrier exploded");
  EXPECT_EQ(w, nullptr);

  // A work's failure and its message reach the caller's thread through the group's host.
  pg_backend_op_t recv = op(PG_OP_RECV);
  ASSERT_EQ(kFakeOps.recv(g, &recv, &w), PG_OK);
  EXPECT_EQ(kFakeOps.work_test(w), PG_ERR_PEER_LOST);
  EXPECT_EQ(take_error(), "fake: rank 1 is gone");
  EXPECT_EQ(kFakeOps.work_wait(w, 10), PG_ERR_PEER_LOST);
  int called = 0;
  auto done = [](void* user) { ++*static_cast<int*>(user); };
  EXPECT_EQ(kFakeOps.work_on_complete(w, done, &called), PG_OK);
  EXPECT_EQ(kFakeOps.work_on_complete(w, done, &called), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(called, 1);
  kFakeOps.work_release(w);

  const int before = FakeGroup::shutdowns;
  EXPECT_EQ(kFakeOps.group_abort(g), PG_OK);
  EXPECT_EQ(kFakeOps.group_destroy(g), PG_OK);
  EXPECT_EQ(FakeGroup::shutdowns, before + 1);
  // NULL handles: refused, and said through the negotiated host.
  EXPECT_EQ(kFakeOps.group_destroy(nullptr), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(take_error(), "fake: group_destroy: group is NULL");
  EXPECT_EQ(kFakeOps.work_test(nullptr), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(take_error(), "fake: work_test: work is NULL");
}

TEST_F(KitEntryGroup, SplitAndStatusAnsweringWorksAndShutdown) {
  pg_backend_group_t parent = nullptr, child = nullptr;
  ASSERT_EQ(kSplittingOps.group_create(&config_, &parent), PG_OK) << take_error();
  EXPECT_EQ(kSplittingOps.group_split(parent, PG_SPLIT_NO_COLOR, 0, nullptr, &child), PG_OK);
  EXPECT_EQ(child, nullptr);
  ASSERT_EQ(kSplittingOps.group_split(parent, 3, 0, &config_, &child), PG_OK);
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(kSplittingOps.group_destroy(child), PG_OK);
  // Works and shutdown that answer with a Status: passed through as they are.
  pg_backend_op_t barrier{};
  barrier.struct_size = sizeof(barrier);
  barrier.op = PG_OP_BARRIER;
  pg_backend_work_t w = nullptr;
  ASSERT_EQ(kSplittingOps.barrier(parent, &barrier, &w), PG_OK);
  EXPECT_EQ(kSplittingOps.work_wait(w, 5), PG_PENDING);
  EXPECT_EQ(kSplittingOps.work_test(w), PG_ERR_TIMEOUT);
  EXPECT_EQ(take_error(), "splitting: too late");
  kSplittingOps.work_release(w);
  SplittingGroup::fail_shutdown = true;
  EXPECT_EQ(kSplittingOps.group_destroy(parent), PG_ERR_BACKEND);  // and the handle is gone
  EXPECT_EQ(take_error(), "splitting: teardown failed");
  SplittingGroup::fail_shutdown = false;
}

// ---- negotiate ---------------------------------------------------------------------

const Offer kOffer{
    .name = "fake", .description = "a fake", .ops = &kFakeOps, .host_size = kHostKernelsSize};

pg_backend_negotiate_in_t offer_in(const pg_host_services_t* host, uint32_t lo = 1,
                                   uint32_t hi = 1) {
  return {sizeof(pg_backend_negotiate_in_t), lo, hi, 0, host};
}

TEST(KitNegotiate, FillsVersionOnesFieldsAndNothingPast) {
  const size_t size = sizeof(pg_backend_negotiate_out_t) + 32;
  OutBuffer out(size, static_cast<uint32_t>(size));
  pg_backend_negotiate_in_t in = offer_in(&kHost, 1, 4);
  ASSERT_EQ(negotiate(&in, out.get(), kOffer), PG_OK) << take_error();
  EXPECT_EQ(out.get()->struct_size, size);
  EXPECT_EQ(out.get()->version, 1u);
  EXPECT_STREQ(out.get()->name, "fake");
  EXPECT_EQ(out.get()->native_ops, kP2pOps | 1u << PG_OP_BARRIER);
  EXPECT_EQ(out.get()->native_dtypes, kAllDtypes);
  EXPECT_EQ(out.get()->ops, &kFakeOps);
  EXPECT_TRUE(out.untouched_from(sizeof(pg_backend_negotiate_out_t)));
  EXPECT_EQ(negotiated_host(), &kHost);
}

TEST(KitNegotiate, AShortOutStructIsRefusedUntouched) {
  const uint32_t declared = kNegotiateOutV1Size - sizeof(void*);  // no room for ops
  OutBuffer out(sizeof(pg_backend_negotiate_out_t), declared);
  const std::vector<unsigned char> before = out.bytes;
  pg_backend_negotiate_in_t in = offer_in(&kHost);
  EXPECT_EQ(negotiate(&in, out.get(), kOffer), PG_ERR_ABI_MISMATCH);
  EXPECT_EQ(take_error(), "fake: negotiate output struct_size 40 is too small");
  EXPECT_EQ(out.bytes, before);
}

TEST(KitNegotiate, RefusesHostsTooShortForThePlugin) {
  OutBuffer out(sizeof(pg_backend_negotiate_out_t), sizeof(pg_backend_negotiate_out_t));
  const std::vector<unsigned char> before = out.bytes;
  pg_host_services_t old_host = kHost;
  old_host.struct_size = offsetof(pg_host_services_t, reduce);  // no kernels
  pg_backend_negotiate_in_t in = offer_in(&old_host);
  EXPECT_EQ(negotiate(&in, out.get(), kOffer), PG_ERR_ABI_MISMATCH);
  EXPECT_EQ(take_error(), "fake needs the host's reduce and scale_down services");
  EXPECT_EQ(out.bytes, before);
  // Enough for a plugin that only reports errors.
  Offer modest = kOffer;
  modest.host_size = kHostSetErrorSize;
  EXPECT_EQ(negotiate(&in, out.get(), modest), PG_OK) << take_error();
  // A NULL kernel in a long enough table is refused too.
  pg_host_services_t holey = kHost;
  holey.scale_down = nullptr;
  in = offer_in(&holey);
  EXPECT_EQ(negotiate(&in, out.get(), kOffer), PG_ERR_ABI_MISMATCH);
  // Without set_error nobody can be told: INVALID_ARGUMENT, and no call.
  pg_host_services_t mute = kHost;
  mute.set_error = nullptr;
  in = offer_in(&mute);
  t_errors = 0;
  EXPECT_EQ(negotiate(&in, out.get(), kOffer), PG_ERR_INVALID_ARGUMENT);
  in = offer_in(nullptr);
  EXPECT_EQ(negotiate(&in, out.get(), kOffer), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t_errors, 0);
}

TEST(KitNegotiate, RefusesVersionsAndInputsItCannotRead) {
  OutBuffer out(sizeof(pg_backend_negotiate_out_t), sizeof(pg_backend_negotiate_out_t));
  const std::vector<unsigned char> before = out.bytes;
  pg_backend_negotiate_in_t in = offer_in(&kHost, 2, 3);
  EXPECT_EQ(negotiate(&in, out.get(), kOffer), PG_ERR_ABI_MISMATCH);
  EXPECT_EQ(take_error(), "fake speaks backend interface version 1; the core offers 2..3");
  EXPECT_EQ(out.bytes, before);
  in = offer_in(&kHost);
  in.struct_size = offsetof(pg_backend_negotiate_in_t, host);  // no host pointer
  EXPECT_EQ(negotiate(&in, out.get(), kOffer), PG_ERR_ABI_MISMATCH);
  EXPECT_EQ(negotiate(nullptr, out.get(), kOffer), PG_ERR_INVALID_ARGUMENT);
  in = offer_in(&kHost);
  EXPECT_EQ(negotiate(&in, nullptr, kOffer), PG_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(take_error(), "fake: pg_backend_negotiate's out is NULL");
}

}  // namespace
}  // namespace procgroup::kit
