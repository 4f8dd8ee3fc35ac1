// check_negotiation on hand-built answers: one test per rule, so each rejection reason and
// each masking of capability bits is pinned without loading any library.
#include "loader/negotiate_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace procgroup::detail {
namespace {

using ::testing::HasSubstr;

pg_status_t fake_op(pg_backend_group_t, const pg_backend_op_t*, pg_backend_work_t*) {
  return PG_OK;
}
pg_status_t fake_create(const pg_backend_group_config_t*, pg_backend_group_t*) { return PG_OK; }
pg_status_t fake_group(pg_backend_group_t) { return PG_OK; }
pg_status_t fake_test(pg_backend_work_t) { return PG_OK; }
pg_status_t fake_wait(pg_backend_work_t, int64_t) { return PG_OK; }
void fake_release(pg_backend_work_t) {}
pg_status_t fake_split(pg_backend_group_t, int32_t, int32_t, const pg_backend_group_config_t*,
                       pg_backend_group_t*) {
  return PG_OK;
}

constexpr pg_backend_op_fn pg_backend_ops_t::*kAllOps[] = {&pg_backend_ops_t::allreduce,
                                                           &pg_backend_ops_t::broadcast,
                                                           &pg_backend_ops_t::reduce,
                                                           &pg_backend_ops_t::allgather,
                                                           &pg_backend_ops_t::reduce_scatter,
                                                           &pg_backend_ops_t::gather,
                                                           &pg_backend_ops_t::scatter,
                                                           &pg_backend_ops_t::alltoall,
                                                           &pg_backend_ops_t::barrier,
                                                           &pg_backend_ops_t::send,
                                                           &pg_backend_ops_t::recv};

class LoaderNegotiateCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    ops_.struct_size = sizeof(ops_);
    ops_.group_create = fake_create;
    ops_.group_destroy = fake_group;
    ops_.group_abort = fake_group;
    ops_.work_test = fake_test;
    ops_.work_wait = fake_wait;
    ops_.work_release = fake_release;
    for (auto entry : kAllOps) ops_.*entry = fake_op;
    out_.struct_size = sizeof(out_);
    out_.version = 1;
    out_.name = "good_1";
    out_.description = "a description";
    out_.native_ops = (1u << PG_OP_COUNT_) - 1;
    out_.native_dtypes = 1u << PG_DTYPE_F32;
    out_.native_reduce_ops = 1u << PG_REDUCE_SUM;
    out_.devices = 1u << PG_DEVICE_CPU;
    out_.ops = &ops_;
  }

  Result<NegotiatedBackend> check() { return check_negotiation(out_, 1, 1); }

  void expect_rejected(pg_status_t code, const std::string& needle) {
    Result<NegotiatedBackend> r = check();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    EXPECT_THAT(r.status().message(), HasSubstr(needle));
  }

  pg_backend_ops_t ops_{};
  pg_backend_negotiate_out_t out_{};
};

TEST_F(LoaderNegotiateCheck, CompleteAnswerIsKeptAsIs) {
  Result<NegotiatedBackend> r = check();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->version, 1u);
  EXPECT_EQ(r->name, "good_1");
  EXPECT_EQ(r->description, "a description");
  EXPECT_EQ(r->native_ops, (1u << PG_OP_COUNT_) - 1);
  EXPECT_EQ(r->native_dtypes, 1u << PG_DTYPE_F32);
  EXPECT_EQ(r->native_reduce_ops, 1u << PG_REDUCE_SUM);
  EXPECT_EQ(r->devices, 1u << PG_DEVICE_CPU);
  EXPECT_EQ(r->ops, &ops_);
  EXPECT_TRUE(r->warnings.empty());
}

TEST_F(LoaderNegotiateCheck, VersionOutsideTheRangeIsAbiMismatch) {
  out_.version = 0;
  expect_rejected(PG_ERR_ABI_MISMATCH, "version 0, outside the range 1..1");
  out_.version = 2;
  expect_rejected(PG_ERR_ABI_MISMATCH, "version 2, outside the range 1..1");
  // The same answer is fine for a core that speaks 1..2.
  EXPECT_TRUE(check_negotiation(out_, 1, 2).ok());
}

TEST_F(LoaderNegotiateCheck, NameMustBePresentAndWellFormed) {
  out_.name = nullptr;
  expect_rejected(PG_ERR_BACKEND, "no name");
  for (const char* bad : {"", "Upper", "with-dash", "sp ace", "dot.so", "\x01"}) {
    out_.name = bad;
    expect_rejected(PG_ERR_BACKEND, "is not [a-z0-9_]+");
  }
  const std::string longest(kMaxBackendNameLength, 'z');
  out_.name = longest.c_str();
  EXPECT_TRUE(check().ok());
  const std::string too_long(kMaxBackendNameLength + 1, 'z');
  out_.name = too_long.c_str();
  expect_rejected(PG_ERR_BACKEND, "of 1 to 64 characters");
}

TEST_F(LoaderNegotiateCheck, MissingTableIsBackendError) {
  out_.ops = nullptr;
  expect_rejected(PG_ERR_BACKEND, "no function table");
}

TEST_F(LoaderNegotiateCheck, TableShorterThanVersionOneIsAbiMismatch) {
  ops_.struct_size = PG_BACKEND_OPS_V1_SIZE - 1;
  expect_rejected(PG_ERR_ABI_MISMATCH, "at least " + std::to_string(PG_BACKEND_OPS_V1_SIZE));
  ops_.struct_size = PG_BACKEND_OPS_V1_SIZE;
  EXPECT_TRUE(check().ok());
  ops_.struct_size = PG_BACKEND_OPS_V1_SIZE + 64;  // a newer, longer table is fine
  EXPECT_TRUE(check().ok());
}

TEST_F(LoaderNegotiateCheck, SplitEntryIsTakenOnlyFromATableThatHoldsIt) {
  ops_.group_split = fake_split;
  // Version 1's first tables end at recv: whatever lies beyond is not theirs to read.
  for (uint32_t size :
       {uint32_t{PG_BACKEND_OPS_V1_SIZE}, uint32_t{PG_BACKEND_OPS_SPLIT_SIZE - 1}}) {
    ops_.struct_size = size;
    Result<NegotiatedBackend> r = check();
    ASSERT_TRUE(r.ok()) << size << ": " << r.status().to_string();
    EXPECT_EQ(r->group_split, nullptr) << size;
  }
  for (uint32_t size : {uint32_t{PG_BACKEND_OPS_SPLIT_SIZE}, uint32_t{sizeof(ops_)}}) {
    ops_.struct_size = size;
    Result<NegotiatedBackend> r = check();
    ASSERT_TRUE(r.ok()) << size << ": " << r.status().to_string();
    EXPECT_EQ(r->group_split, &fake_split) << size;
  }
  ops_.group_split = nullptr;  // optional: a full table without it is complete too
  Result<NegotiatedBackend> r = check();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->group_split, nullptr);
}

pg_status_t fake_on_complete(pg_backend_work_t, pg_backend_work_done_fn, void*) { return PG_OK; }

TEST_F(LoaderNegotiateCheck, OnCompleteEntryIsTakenOnlyFromATableThatHoldsIt) {
  ops_.work_on_complete = fake_on_complete;
  for (uint32_t size : {uint32_t{PG_BACKEND_OPS_SPLIT_SIZE},
                        uint32_t{PG_BACKEND_OPS_ON_COMPLETE_SIZE - 1}}) {
    ops_.struct_size = size;
    Result<NegotiatedBackend> r = check();
    ASSERT_TRUE(r.ok()) << size << ": " << r.status().to_string();
    EXPECT_EQ(r->work_on_complete, nullptr) << size;
  }
  ops_.struct_size = PG_BACKEND_OPS_ON_COMPLETE_SIZE;
  Result<NegotiatedBackend> r = check();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->work_on_complete, &fake_on_complete);
}

TEST_F(LoaderNegotiateCheck, EachRequiredEntryIsChecked) {
  const std::pair<const char*, void (*)(pg_backend_ops_t&)> cases[] = {
      {"group_create", [](pg_backend_ops_t& o) { o.group_create = nullptr; }},
      {"group_destroy", [](pg_backend_ops_t& o) { o.group_destroy = nullptr; }},
      {"group_abort", [](pg_backend_ops_t& o) { o.group_abort = nullptr; }},
      {"work_test", [](pg_backend_ops_t& o) { o.work_test = nullptr; }},
      {"work_wait", [](pg_backend_ops_t& o) { o.work_wait = nullptr; }},
      {"work_release", [](pg_backend_ops_t& o) { o.work_release = nullptr; }},
  };
  for (const auto& [name, clear] : cases) {
    SetUp();
    clear(ops_);
    expect_rejected(PG_ERR_BACKEND, std::string("required table entry ") + name + " is NULL");
  }
}

TEST_F(LoaderNegotiateCheck, SendRecvAloneIsComplete) {
  for (auto entry : kAllOps) {
    if (entry != &pg_backend_ops_t::send && entry != &pg_backend_ops_t::recv) ops_.*entry = nullptr;
  }
  out_.native_ops = (1u << PG_OP_SEND) | (1u << PG_OP_RECV);
  Result<NegotiatedBackend> r = check();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->native_ops, (1u << PG_OP_SEND) | (1u << PG_OP_RECV));
}

TEST_F(LoaderNegotiateCheck, EveryCollectiveWithoutSendRecvIsComplete) {
  ops_.send = nullptr;
  ops_.recv = nullptr;
  out_.native_ops = ~0u;  // "everything": taken as whatever the table has
  Result<NegotiatedBackend> r = check();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->native_ops, (1u << PG_OP_SEND) - 1);
  EXPECT_TRUE(r->warnings.empty());
}

TEST_F(LoaderNegotiateCheck, NeitherSendRecvNorEveryCollectiveIsRejected) {
  ops_.recv = nullptr;
  ops_.alltoall = nullptr;
  expect_rejected(PG_ERR_BACKEND, "recv NULL");
  expect_rejected(PG_ERR_BACKEND, "missing alltoall");
}

TEST_F(LoaderNegotiateCheck, UnknownCapabilityBitsAreMaskedWithAWarning) {
  out_.native_dtypes = (1u << PG_DTYPE_F32) | (1u << PG_DTYPE_COUNT_) | 1u;  // + INVALID bit
  out_.native_reduce_ops = (1u << PG_REDUCE_MAX) | (1u << 31);
  out_.devices = (1u << PG_DEVICE_CUDA) | (1u << 7);
  out_.native_ops = (1u << PG_OP_ALLREDUCE) | (1u << 20);
  Result<NegotiatedBackend> r = check();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->native_dtypes, 1u << PG_DTYPE_F32);
  EXPECT_EQ(r->native_reduce_ops, 1u << PG_REDUCE_MAX);
  EXPECT_EQ(r->devices, 1u << PG_DEVICE_CUDA);
  EXPECT_EQ(r->native_ops, 1u << PG_OP_ALLREDUCE);
  ASSERT_EQ(r->warnings.size(), 4u);
  EXPECT_THAT(r->warnings[0], HasSubstr("native_ops has bits 0x100000"));
  EXPECT_THAT(r->warnings[1], HasSubstr("native_dtypes has bits 0x201"));
}

TEST_F(LoaderNegotiateCheck, AllOnesMeansEveryKnownBitSilently) {
  out_.native_dtypes = ~0u;
  out_.native_reduce_ops = ~0u;
  out_.devices = ~0u;
  Result<NegotiatedBackend> r = check();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->native_dtypes, kKnownDtypesMask);
  EXPECT_EQ(r->native_reduce_ops, kKnownReduceOpsMask);
  EXPECT_EQ(r->devices, kKnownDevicesMask);
  EXPECT_TRUE(r->warnings.empty());
}

TEST_F(LoaderNegotiateCheck, ClaimedOpsWithNullEntriesAreCleared) {
  ops_.allgather = nullptr;
  Result<NegotiatedBackend> r = check();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->native_ops, ((1u << PG_OP_COUNT_) - 1) & ~(1u << PG_OP_ALLGATHER));
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("emulated"));
}

TEST_F(LoaderNegotiateCheck, MissingDescriptionIsEmpty) {
  out_.description = nullptr;
  Result<NegotiatedBackend> r = check();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->description, "");
}

}  // namespace
}  // namespace procgroup::detail
