// bench_types.h — the vocabulary shared by collbench and mpi_collbench: which collective,
// which element type, which reduction. Independent of procgroup.h and mpi.h, so each tool
// maps these onto its own library's constants.
//
//   Coll op = parse_coll("allreduce").value();      // std::nullopt for an unknown name
//   size_t es = dtype_size(Dtype::kBf16);           // 2
//   std::printf("%s %s\n", coll_name(op), dtype_name(Dtype::kBf16));
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace procgroup::bench {

enum class Coll {
  kAllreduce,
  kAllgather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAlltoall,
  kGather,
  kScatter,
  kSendrecv,
};
inline constexpr std::array kAllColls = {Coll::kAllreduce, Coll::kAllgather, Coll::kReduceScatter,
                                         Coll::kBroadcast, Coll::kReduce,    Coll::kAlltoall,
                                         Coll::kGather,    Coll::kScatter,   Coll::kSendrecv};

enum class Dtype { kF32, kF64, kF16, kBf16, kI8, kU8, kI32, kI64 };
inline constexpr std::array kAllDtypes = {Dtype::kF32, Dtype::kF64, Dtype::kF16, Dtype::kBf16,
                                          Dtype::kI8,  Dtype::kU8,  Dtype::kI32, Dtype::kI64};

enum class RedOp { kSum, kProd, kMin, kMax, kAvg };
inline constexpr std::array kAllRedOps = {RedOp::kSum, RedOp::kProd, RedOp::kMin, RedOp::kMax,
                                          RedOp::kAvg};

// Command-line names: "allreduce", "reduce_scatter", ...; "f32", "bf16", ...; "sum", ...
const char* coll_name(Coll op);
const char* dtype_name(Dtype dtype);
const char* redop_name(RedOp op);
std::optional<Coll> parse_coll(std::string_view name);
// Takes our names and nccl-tests' spellings of the same types ("float", "half", "bfloat16",
// "double", "int8", "char", "uint8", "int32", "int", "int64").
std::optional<Dtype> parse_dtype(std::string_view name);
// Why name is not a dtype: nccl-tests' types procgroup lacks (uint32, uint64, fp8) are named as
// such; anything else gets the list of accepted names.
std::string dtype_error(std::string_view name);
std::optional<RedOp> parse_redop(std::string_view name);

size_t dtype_size(Dtype dtype);
bool is_floating(Dtype dtype);

// Whether the collective reduces (takes a reduce op) or has a root.
bool reduces(Coll op);
bool rooted(Coll op);
// sendrecv has no in-place form (as in nccl-tests).
bool has_in_place(Coll op);

}  // namespace procgroup::bench
