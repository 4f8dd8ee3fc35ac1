// Struct growth at the user C ABI: every options struct starts with struct_size and only
// grows. The sizes of ABI 1.0 come from the frozen headers (layout_probe.c), not from
// sizeof today, so these tests keep their meaning once a struct grows in a 1.x release:
// - a struct exactly as large as in 1.0 is accepted (an old caller's smaller struct);
// - a larger one (a newer caller) is accepted, and the core neither reads meaning into
//   nor writes to the bytes beyond what it knows;
// - anything smaller than 1.0 is rejected with PG_ERR_INVALID_ARGUMENT and a message
//   naming the field and the *_INIT macro, never read past its end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "layout_probe.h"
#include "procgroup/procgroup.h"

namespace {

uint32_t v1_size(const char* type) {
  for (const pg_layout_row_t* row = pg_layout_frozen_v1; row->name != nullptr; ++row)
    if (std::strcmp(row->name, type) == 0) return static_cast<uint32_t>(row->first);
  ADD_FAILURE() << type << " is not in the v1 surface";
  return 0;
}

// A struct of any size, v1 fields first, the rest a recognisable pattern.
template <class T>
class Grown {
 public:
  explicit Grown(const T& init, uint32_t size) : bytes_(std::max<size_t>(size, sizeof(T)), 0xAB) {
    std::memcpy(bytes_.data(), &init, std::min<size_t>(sizeof(T), size));
    std::memcpy(bytes_.data(), &size, sizeof size);  // struct_size comes first
  }
  T* get() { return reinterpret_cast<T*>(bytes_.data()); }
  bool tail_untouched(size_t from) const {
    for (size_t i = from; i < bytes_.size(); ++i)
      if (bytes_[i] != 0xAB) return false;
    return true;
  }

 private:
  std::vector<unsigned char> bytes_;
};

void expect_rejected(pg_status_t s, const char* field_hint, const char* init_macro) {
  EXPECT_EQ(s, PG_ERR_INVALID_ARGUMENT) << pg_status_name(s);
  const std::string message = pg_last_error();
  EXPECT_NE(message.find(field_hint), std::string::npos) << message;
  EXPECT_NE(message.find(init_macro), std::string::npos) << message;
}

// Sizes no caller of any version can have: below the 1.0 struct.
std::vector<uint32_t> too_small(uint32_t v1) { return {0, 4, v1 - 8, v1 - 1}; }

pg_group_options_t one_rank_options() {
  pg_group_options_t o = PG_GROUP_OPTIONS_INIT;
  o.size = 1;
  o.backend = "loopback";
  return o;
}

TEST(StructGrowth, GroupOptions) {
  const uint32_t v1 = v1_size("pg_group_options_t");
  for (uint32_t size : {v1, v1 + 8, v1 + 64}) {
    Grown<pg_group_options_t> o(one_rank_options(), size);
    pg_group_t g = nullptr;
    ASSERT_EQ(pg_group_create(o.get(), &g), PG_OK) << size << ": " << pg_last_error();
    EXPECT_EQ(pg_group_destroy(g), PG_OK);
  }
  for (uint32_t size : too_small(v1)) {
    Grown<pg_group_options_t> o(one_rank_options(), size);
    pg_group_t g = nullptr;
    expect_rejected(pg_group_create(o.get(), &g), "struct_size", "PG_GROUP_OPTIONS_INIT");
    EXPECT_EQ(g, nullptr);
  }
}

class OneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    pg_group_options_t o = one_rank_options();
    ASSERT_EQ(pg_group_create(&o, &group_), PG_OK) << pg_last_error();
  }
  void TearDown() override { EXPECT_EQ(pg_group_destroy(group_), PG_OK) << pg_last_error(); }
  pg_group_t group_ = nullptr;
};

TEST_F(OneRank, OpOptions) {
  const uint32_t v1 = v1_size("pg_op_options_t");
  pg_op_options_t max = PG_OP_OPTIONS_INIT;
  max.reduce_op = PG_REDUCE_MAX;
  for (uint32_t size : {v1, v1 + 8, v1 + 64}) {
    Grown<pg_op_options_t> o(max, size);
    float x[3] = {1, 5, 2};
    pg_buffer_t b = pg_buffer_cpu(x, 3, PG_DTYPE_F32);
    ASSERT_EQ(pg_allreduce(group_, nullptr, &b, o.get(), nullptr), PG_OK)
        << size << ": " << pg_last_error();
    EXPECT_EQ(x[1], 5.0f);
    EXPECT_TRUE(o.tail_untouched(std::min<size_t>(size, sizeof(pg_op_options_t))))
        << "an options struct is input only";
  }
  for (uint32_t size : too_small(v1)) {
    Grown<pg_op_options_t> o(max, size);
    float x = 1;
    pg_buffer_t b = pg_buffer_cpu(&x, 1, PG_DTYPE_F32);
    expect_rejected(pg_allreduce(group_, nullptr, &b, o.get(), nullptr), "struct_size",
                    "PG_OP_OPTIONS_INIT");
  }
}

TEST_F(OneRank, Capabilities) {
  const uint32_t v1 = v1_size("pg_capabilities_t");
  for (uint32_t size : {v1, v1 + 4, v1 + 64}) {
    pg_capabilities_t init = PG_CAPABILITIES_INIT;
    Grown<pg_capabilities_t> caps(init, size);
    ASSERT_EQ(pg_group_capabilities(group_, caps.get()), PG_OK) << pg_last_error();
    EXPECT_EQ(caps.get()->native_ops, (1u << PG_OP_COUNT_) - 1) << "loopback runs everything";
    EXPECT_EQ(caps.get()->devices, 1u << PG_DEVICE_CPU);
    EXPECT_EQ(caps.get()->struct_size, size) << "struct_size is the caller's";
    EXPECT_TRUE(caps.tail_untouched(std::min<size_t>(size, sizeof(pg_capabilities_t))))
        << "the core wrote past the fields it knows or past struct_size";
  }
  for (uint32_t size : too_small(v1)) {
    pg_capabilities_t init = PG_CAPABILITIES_INIT;
    Grown<pg_capabilities_t> caps(init, size);
    expect_rejected(pg_group_capabilities(group_, caps.get()), "struct_size",
                    "PG_CAPABILITIES_INIT");
    EXPECT_TRUE(caps.tail_untouched(std::max<size_t>(size, sizeof(uint32_t))))
        << "a rejected struct must not be written";
  }
}

TEST_F(OneRank, Buffers) {
  const uint32_t v1 = v1_size("pg_buffer_t");
  int32_t x[4] = {1, 2, 3, 4};
  for (uint32_t size : {v1, v1 + 8}) {
    Grown<pg_buffer_t> b(pg_buffer_cpu(x, 4, PG_DTYPE_I32), size);
    EXPECT_EQ(pg_allreduce(group_, nullptr, b.get(), nullptr, nullptr), PG_OK) << pg_last_error();
  }
  for (uint32_t size : too_small(v1)) {
    Grown<pg_buffer_t> b(pg_buffer_cpu(x, 4, PG_DTYPE_I32), size);
    expect_rejected(pg_allreduce(group_, nullptr, b.get(), nullptr, nullptr), "struct_size",
                    "PG_BUFFER_INIT");
  }
}

}  // namespace
