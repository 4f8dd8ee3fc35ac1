#include "param_check.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "host_collective.h"
#include "kernels.h"
#include "procgroup/ddp/error.h"

namespace procgroup::ddp::detail {
namespace {

// Round 1: one fixed-size summary per rank.
enum Field { kCount, kShapes, kNames, kDevices, kFirst, kCap, kHook, kStatus, kFields };
// Round 3: one fixed-size record per parameter; names are compared by hash, shown by prefix.
constexpr size_t kNameChars = 40;
constexpr size_t kRecord = 4 + kNameChars / 8;
constexpr size_t kMessageBytes = 512;

int64_t as_i64(uint64_t v) { return std::bit_cast<int64_t>(v); }

std::vector<int64_t> summary(std::span<const Parameter> params, const ReducerConfig& config,
                             const LocalProblem& problem) {
  uint64_t shapes = kFnvSeed, names = kFnvSeed, devices = kFnvSeed;
  for (const Parameter& p : params) {
    shapes = fnv1a(&p.numel, sizeof p.numel, shapes);
    shapes = fnv1a(&p.dtype, sizeof p.dtype, shapes);
    names = fnv1a(p.name, names);
    names = fnv1a("\0", 1, names);
    devices = fnv1a(&p.device.type, sizeof p.device.type, devices);
  }
  std::vector<int64_t> s(kFields);
  s[kCount] = static_cast<int64_t>(params.size());
  s[kShapes] = as_i64(shapes);
  s[kNames] = as_i64(names);
  s[kDevices] = as_i64(devices);
  s[kFirst] = as_i64(config.first_bucket_bytes);
  s[kCap] = as_i64(config.bucket_cap_bytes);
  s[kHook] = as_i64(fnv1a(config.hook_name));
  s[kStatus] = problem.status;
  return s;
}

std::vector<int64_t> gather(const Group& group, const std::vector<int64_t>& mine,
                            const Exec& via) {
  std::vector<int64_t> all(mine.size() * group.size());
  host_allgather(group, std::span<const int64_t>(mine), std::span(all), via);
  return all;
}

[[noreturn]] void throw_local_problem(const Group& group, const std::vector<int64_t>& rows,
                                      const LocalProblem& problem, const Exec& via) {
  std::vector<uint8_t> mine(kMessageBytes, 0);
  std::memcpy(mine.data(), problem.message.data(),
              std::min(problem.message.size(), kMessageBytes - 1));
  std::vector<uint8_t> all(kMessageBytes * group.size());
  host_allgather(group, std::span<const uint8_t>(mine), std::span(all), via);
  for (int r = 0; r < group.size(); ++r) {
    const auto status = static_cast<pg_status_t>(rows[r * kFields + kStatus]);
    if (status == PG_OK) continue;
    const char* text = reinterpret_cast<const char*>(all.data() + r * kMessageBytes);
    throw Error(status, "Reducer construction failed on rank " + std::to_string(r) + ": " +
                            std::string(text, strnlen(text, kMessageBytes)));
  }
  throw Error(PG_ERR_INTERNAL, "Reducer agreement check lost a rank's problem");
}

std::vector<int64_t> records(std::span<const Parameter> params, size_t padded) {
  std::vector<int64_t> out(padded * kRecord, -1);
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = params[i];
    int64_t* r = &out[i * kRecord];
    r[0] = static_cast<int64_t>(p.numel);
    r[1] = p.dtype;
    r[2] = p.device.type;
    r[3] = as_i64(fnv1a(p.name));
    std::memset(&r[4], 0, kNameChars);
    std::memcpy(&r[4], p.name.data(), std::min(p.name.size(), kNameChars));
  }
  return out;
}

std::string describe(const int64_t* r) {
  const char* name = reinterpret_cast<const char*>(&r[4]);
  std::string text = "'" + std::string(name, strnlen(name, kNameChars)) + "' " +
                     dtype_name(static_cast<pg_dtype_t>(r[1])) + " x " + std::to_string(r[0]);
  if (r[2] == PG_DEVICE_CUDA) text += " on cuda";
  return text;
}

[[noreturn]] void throw_parameter_difference(const Group& group, const std::vector<int64_t>& rows,
                                             std::span<const Parameter> params, const Exec& via) {
  const int size = group.size();
  int64_t most = 0;
  for (int r = 0; r < size; ++r) most = std::max(most, rows[r * kFields + kCount]);
  const std::vector<int64_t> all =
      gather(group, records(params, static_cast<size_t>(most)), via);
  const size_t stride = static_cast<size_t>(most) * kRecord;
  for (int r = 1; r < size; ++r) {
    const int64_t n0 = rows[kCount], nr = rows[r * kFields + kCount];
    for (int64_t i = 0; i < std::max(n0, nr); ++i) {
      const int64_t* a = &all[i * kRecord];
      const int64_t* b = &all[r * stride + i * kRecord];
      if (i < n0 && i < nr && std::equal(a, a + 4, b)) continue;
      std::string msg = "ranks registered different parameter lists: rank 0 has " +
                        std::to_string(n0) + " parameters, rank " + std::to_string(r) + " has " +
                        std::to_string(nr) + "; first difference at index " + std::to_string(i) +
                        ": rank 0 has " + (i < n0 ? describe(a) : "nothing") + ", rank " +
                        std::to_string(r) + " has " + (i < nr ? describe(b) : "nothing");
      throw Error(PG_ERR_MISMATCH, msg);
    }
  }
  throw Error(PG_ERR_MISMATCH, "ranks registered different parameter lists (hash mismatch)");
}

}  // namespace

void check_parameters_agree(const Group& group, std::span<const Parameter> params,
                            const ReducerConfig& config, const LocalProblem& problem,
                            const Exec& via) {
  const std::vector<int64_t> mine = summary(params, config, problem);
  const std::vector<int64_t> rows = gather(group, mine, via);
  const int size = group.size();
  for (int r = 0; r < size; ++r) {
    if (rows[r * kFields + kStatus] != PG_OK) throw_local_problem(group, rows, problem, via);
  }
  for (int r = 1; r < size; ++r) {
    const int64_t* row = &rows[r * kFields];
    if (std::equal(row, row + kFields, rows.begin())) continue;
    if (row[kFirst] != rows[kFirst] || row[kCap] != rows[kCap] || row[kHook] != rows[kHook]) {
      throw Error(PG_ERR_MISMATCH,
                  "ranks use different Reducer options: rank 0 has first_bucket_bytes " +
                      std::to_string(rows[kFirst]) + ", bucket_cap_bytes " +
                      std::to_string(rows[kCap]) + "; rank " + std::to_string(r) + " has " +
                      std::to_string(row[kFirst]) + ", " + std::to_string(row[kCap]) +
                      (row[kHook] != rows[kHook] ? ", and a different comm_hook" : ""));
    }
    throw_parameter_difference(group, rows, params, via);
  }
}

}  // namespace procgroup::ddp::detail
