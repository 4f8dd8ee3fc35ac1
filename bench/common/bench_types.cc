// Names and properties of collectives, dtypes and reduce ops (see bench_types.h).
#include "bench_types.h"

namespace procgroup::bench {
namespace {

template <typename T, size_t N>
std::optional<T> find_by_name(const std::array<T, N>& all, const char* (*name_of)(T),
                              std::string_view name) {
  for (T value : all) {
    if (name == name_of(value)) return value;
  }
  return std::nullopt;
}

struct DtypeAlias {
  std::string_view name;
  Dtype dtype;
};
// nccl-tests' -d names (test_typenames, and "char"/"int" of NCCL 1) for procgroup's types.
constexpr std::array<DtypeAlias, 10> kNcclTestsDtypes = {{{"float", Dtype::kF32},
                                                          {"double", Dtype::kF64},
                                                          {"half", Dtype::kF16},
                                                          {"bfloat16", Dtype::kBf16},
                                                          {"int8", Dtype::kI8},
                                                          {"char", Dtype::kI8},
                                                          {"uint8", Dtype::kU8},
                                                          {"int32", Dtype::kI32},
                                                          {"int", Dtype::kI32},
                                                          {"int64", Dtype::kI64}}};
// nccl-tests' types with no procgroup dtype (pg_dtype_t has no unsigned 32/64-bit or fp8).
constexpr std::array<std::string_view, 6> kNcclTestsOnly = {"uint32", "uint64",   "f8e4m3",
                                                            "f8e5m2", "fp8_e4m3", "fp8_e5m2"};

}  // namespace

const char* coll_name(Coll op) {
  switch (op) {
    case Coll::kAllreduce: return "allreduce";
    case Coll::kAllgather: return "allgather";
    case Coll::kReduceScatter: return "reduce_scatter";
    case Coll::kBroadcast: return "broadcast";
    case Coll::kReduce: return "reduce";
    case Coll::kAlltoall: return "alltoall";
    case Coll::kGather: return "gather";
    case Coll::kScatter: return "scatter";
    case Coll::kSendrecv: return "sendrecv";
  }
  return "invalid";
}

const char* dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF32: return "f32";
    case Dtype::kF64: return "f64";
    case Dtype::kF16: return "f16";
    case Dtype::kBf16: return "bf16";
    case Dtype::kI8: return "i8";
    case Dtype::kU8: return "u8";
    case Dtype::kI32: return "i32";
    case Dtype::kI64: return "i64";
  }
  return "invalid";
}

const char* redop_name(RedOp op) {
  switch (op) {
    case RedOp::kSum: return "sum";
    case RedOp::kProd: return "prod";
    case RedOp::kMin: return "min";
    case RedOp::kMax: return "max";
    case RedOp::kAvg: return "avg";
  }
  return "invalid";
}

std::optional<Coll> parse_coll(std::string_view name) {
  return find_by_name(kAllColls, coll_name, name);
}
std::optional<Dtype> parse_dtype(std::string_view name) {
  for (const DtypeAlias& alias : kNcclTestsDtypes) {
    if (name == alias.name) return alias.dtype;
  }
  return find_by_name(kAllDtypes, dtype_name, name);
}

std::string dtype_error(std::string_view name) {
  std::string ours;
  for (Dtype d : kAllDtypes) ours += std::string(ours.empty() ? "" : " ") + dtype_name(d);
  for (std::string_view only : kNcclTestsOnly) {
    if (name == only) {
      return "'" + std::string(name) +
             "' is an nccl-tests type that procgroup has no dtype for "
             "(procgroup's: " +
             ours + ")";
    }
  }
  std::string theirs;
  for (const DtypeAlias& alias : kNcclTestsDtypes) theirs += " " + std::string(alias.name);
  return "unknown type '" + std::string(name) + "': use " + ours + ", nccl-tests' names (" +
         theirs.substr(1) + "), a comma list of them, or all";
}
std::optional<RedOp> parse_redop(std::string_view name) {
  return find_by_name(kAllRedOps, redop_name, name);
}

size_t dtype_size(Dtype dtype) {
  switch (dtype) {
    case Dtype::kI8:
    case Dtype::kU8: return 1;
    case Dtype::kF16:
    case Dtype::kBf16: return 2;
    case Dtype::kF32:
    case Dtype::kI32: return 4;
    case Dtype::kF64:
    case Dtype::kI64: return 8;
  }
  return 0;
}

bool is_floating(Dtype dtype) {
  return dtype == Dtype::kF32 || dtype == Dtype::kF64 || dtype == Dtype::kF16 ||
         dtype == Dtype::kBf16;
}

bool reduces(Coll op) {
  return op == Coll::kAllreduce || op == Coll::kReduce || op == Coll::kReduceScatter;
}

bool rooted(Coll op) {
  return op == Coll::kBroadcast || op == Coll::kReduce || op == Coll::kGather ||
         op == Coll::kScatter;
}

bool has_in_place(Coll op) { return op != Coll::kSendrecv; }

}  // namespace procgroup::bench
