// Rooted collectives over threads: broadcast, reduce, gather and scatter for every root,
// dtype, count and documented buffer form on world sizes 1..8.
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "collectives/algorithms.h"
#include "harness.h"

namespace procgroup::detail::testing {
namespace {

class RootedTest : public ::testing::TestWithParam<int> {};

Bytes concat_inputs(pg_dtype_t dtype, int size, uint64_t count) {
  Bytes all;
  for (int r = 0; r < size; ++r) {
    const Bytes b = make_input(dtype, PG_REDUCE_SUM, r, count);
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

TEST_P(RootedTest, Broadcast) {
  const int size = GetParam();
  for (int root = 0; root < size; ++root) {
    for (pg_dtype_t dtype : kAllDtypes) {
      for (uint64_t count : kCounts) {
        for (Form form : kAllForms) {
          const std::string what = fmt::format("broadcast size {} root {} {} count {} {}", size,
                                               root, dtype_name(dtype), count, form_name(form));
          const Bytes payload = make_input(dtype, PG_REDUCE_SUM, root, count);
          Bytes root_input = payload;
          std::vector<Bytes> outputs(static_cast<size_t>(size), garbage(payload.size()));
          if (form != Form::kOutOfPlace) outputs[static_cast<size_t>(root)] = payload;
          run_all_ok(
              size,
              [&](Transport& t) {
                const auto r = static_cast<size_t>(t.rank());
                CollectiveArgs a;
                a.output = outputs[r].data();
                if (t.rank() == root) {
                  a.input = form == Form::kOutOfPlace    ? root_input.data()
                            : form == Form::kInPlaceSame ? outputs[r].data()
                                                         : nullptr;
                }
                a.count = count;
                a.dtype = dtype;
                a.root = root;
                a.tag_base = 1000;
                return fallback_broadcast(t, a);
              },
              what);
          for (int r = 0; r < size; ++r) {
            EXPECT_TRUE(same_bytes(dtype, payload, outputs[static_cast<size_t>(r)]))
                << what << ", rank " << r;
          }
          EXPECT_EQ(root_input, payload) << what << ": root input modified";
        }
      }
    }
  }
}

TEST_P(RootedTest, Reduce) {
  const int size = GetParam();
  for (int root = 0; root < size; ++root) {
    for (pg_dtype_t dtype : kAllDtypes) {
      for (pg_reduce_op_t op : kAllOps) {
        for (uint64_t count : kCounts) {
          for (Form form : kAllForms) {
            const std::string what = fmt::format("reduce size {} root {} {} count {} {}", size,
                                                 root, describe(dtype, op), count, form_name(form));
            std::vector<Bytes> inputs, outputs;
            for (int r = 0; r < size; ++r) {
              inputs.push_back(make_input(dtype, op, r, count));
              outputs.push_back(form == Form::kOutOfPlace ? garbage(inputs.back().size())
                                                          : inputs.back());
            }
            run_all_ok(
                size,
                [&](Transport& t) {
                  const auto r = static_cast<size_t>(t.rank());
                  CollectiveArgs a;
                  a.output = outputs[r].data();
                  a.input = form == Form::kOutOfPlace    ? inputs[r].data()
                            : form == Form::kInPlaceSame ? outputs[r].data()
                                                         : nullptr;
                  // Out of place, non-roots may pass no output at all.
                  if (form == Form::kOutOfPlace && t.rank() != root) a.output = nullptr;
                  a.count = count;
                  a.dtype = dtype;
                  a.reduce_op = op;
                  a.root = root;
                  return fallback_reduce(t, a);
                },
                what);
            const Bytes expected = reference_reduce(dtype, op, size, count);
            EXPECT_TRUE(same_bytes(dtype, expected, outputs[static_cast<size_t>(root)])) << what;
            for (int r = 0; r < size; ++r) {
              const auto ru = static_cast<size_t>(r);
              const Bytes original = make_input(dtype, op, r, count);
              if (form == Form::kOutOfPlace) {
                EXPECT_EQ(inputs[ru], original) << what << ": input of rank " << r << " modified";
              } else if (r != root) {
                EXPECT_EQ(outputs[ru], original) << what << ": non-root " << r << " modified";
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(RootedTest, Gather) {
  const int size = GetParam();
  for (int root = 0; root < size; ++root) {
    for (pg_dtype_t dtype : kAllDtypes) {
      for (uint64_t count : kCounts) {
        for (Form form : kAllForms) {
          const std::string what = fmt::format("gather size {} root {} {} count {} {}", size, root,
                                               dtype_name(dtype), count, form_name(form));
          const size_t block = count * dtype_size(dtype);
          const Bytes expected = concat_inputs(dtype, size, count);
          std::vector<Bytes> inputs, outputs;
          for (int r = 0; r < size; ++r) {
            inputs.push_back(make_input(dtype, PG_REDUCE_SUM, r, count));
            Bytes out = garbage(block * static_cast<size_t>(size));
            // In place, a rank's data already sits in its own block of the output.
            if (form != Form::kOutOfPlace && block != 0) {
              std::copy(inputs.back().begin(), inputs.back().end(),
                        out.begin() + static_cast<ptrdiff_t>(block * static_cast<size_t>(r)));
            }
            outputs.push_back(out);
          }
          run_all_ok(
              size,
              [&](Transport& t) {
                const auto r = static_cast<size_t>(t.rank());
                CollectiveArgs a;
                a.output = outputs[r].data();
                a.input = form == Form::kOutOfPlace    ? inputs[r].data()
                          : form == Form::kInPlaceSame ? outputs[r].data() + r * block
                                                       : nullptr;
                if (form == Form::kOutOfPlace && t.rank() != root) a.output = nullptr;
                a.count = count;
                a.dtype = dtype;
                a.root = root;
                return fallback_gather(t, a);
              },
              what);
          EXPECT_TRUE(same_bytes(dtype, expected, outputs[static_cast<size_t>(root)])) << what;
        }
      }
    }
  }
}

TEST_P(RootedTest, Scatter) {
  const int size = GetParam();
  for (int root = 0; root < size; ++root) {
    for (pg_dtype_t dtype : kAllDtypes) {
      for (uint64_t count : kCounts) {
        for (Form form : kAllForms) {
          const std::string what = fmt::format("scatter size {} root {} {} count {} {}", size, root,
                                               dtype_name(dtype), count, form_name(form));
          const size_t block = count * dtype_size(dtype);
          const Bytes all = concat_inputs(dtype, size, count);
          Bytes root_buffer = all;  // the root's input (in place: its output lives inside)
          std::vector<Bytes> outputs(static_cast<size_t>(size), garbage(block));
          run_all_ok(
              size,
              [&](Transport& t) {
                const auto r = static_cast<size_t>(t.rank());
                CollectiveArgs a;
                a.output = outputs[r].data();
                if (t.rank() == root) {
                  if (form != Form::kOutOfPlace) a.output = root_buffer.data() + r * block;
                  a.input = form == Form::kInPlaceNull ? nullptr : root_buffer.data();
                }
                a.count = count;
                a.dtype = dtype;
                a.root = root;
                return fallback_scatter(t, a);
              },
              what);
          EXPECT_EQ(root_buffer, all) << what << ": root's input modified";
          for (int r = 0; r < size; ++r) {
            if (r == root && form != Form::kOutOfPlace) continue;  // checked just above
            EXPECT_TRUE(same_bytes(dtype, make_input(dtype, PG_REDUCE_SUM, r, count),
                                   outputs[static_cast<size_t>(r)]))
                << what << ", rank " << r;
          }
        }
      }
    }
  }
}

TEST(RootedArgs, BadRootIsInvalidArgument) {
  std::vector<float> buf(4);
  for (int root : {-1, 3}) {
    for (auto* fn : {&fallback_broadcast, &fallback_reduce, &fallback_gather, &fallback_scatter}) {
      ThreadWorld world(3, kTimeout);
      for (const Status& s : world.run([&](Transport& t) {
             std::vector<float> out(12);
             CollectiveArgs a;
             a.input = buf.data();
             a.output = out.data();
             a.count = 4;
             a.dtype = PG_DTYPE_F32;
             a.root = root;
             return fn(t, a);
           })) {
        EXPECT_EQ(s.code(), PG_ERR_INVALID_ARGUMENT) << "root " << root << ": " << s.to_string();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RootedTest, ::testing::ValuesIn(kWorldSizes),
                         [](const auto& param) { return "size" + std::to_string(param.param); });

}  // namespace
}  // namespace procgroup::detail::testing
