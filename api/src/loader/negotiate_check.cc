#include "loader/negotiate_check.h"

#include <cstring>
#include <utility>

#include "procgroup/backend_kit/op_table.hpp"

namespace procgroup::detail {
namespace {

// Longer descriptions are cut: they only ever end up in log lines.
constexpr size_t kMaxDescriptionLength = 1024;

// Keeps the known bits of one capability mask. ~0u is the idiom the header's own example
// uses for "everything", so it is taken silently; other unknown bits (a newer plugin's
// dtype, or garbage) are dropped with a warning.
uint32_t mask_capability(const char* field, uint32_t value, uint32_t known,
                         std::vector<std::string>& warnings) {
  if (value == ~0u) return known;
  if ((value & ~known) != 0) {
    warnings.push_back(fmt::format("{} has bits 0x{:x} this libprocgroup does not know; ignored",
                                   field, value & ~known));
  }
  return value & known;
}

Status check_required_entries(const pg_backend_ops_t& ops) {
  const std::pair<const char*, bool> required[] = {
      {"group_create", ops.group_create != nullptr},
      {"group_destroy", ops.group_destroy != nullptr},
      {"group_abort", ops.group_abort != nullptr},
      {"work_test", ops.work_test != nullptr},
      {"work_wait", ops.work_wait != nullptr},
      {"work_release", ops.work_release != nullptr},
  };
  for (const auto& [name, present] : required) {
    if (!present) return make_error(PG_ERR_BACKEND, "required table entry {} is NULL", name);
  }

  // The core builds every collective over send/recv, so a plugin needs either those two
  // or all the collectives itself; anything in between leaves something impossible.
  const bool has_p2p = ops.send != nullptr && ops.recv != nullptr;
  std::string missing_collectives;
  for (const kit::OpInfo& e : kit::kOps) {
    if (!e.emulated || kit::table_entry(ops, e.op) != nullptr) continue;
    missing_collectives += missing_collectives.empty() ? "" : ", ";
    missing_collectives += e.name;
  }
  if (has_p2p || missing_collectives.empty()) return ok_status();
  return make_error(PG_ERR_BACKEND,
                    "table has neither send and recv (send {}, recv {}) nor every collective "
                    "(missing {}), so the core cannot emulate what is missing",
                    ops.send != nullptr ? "present" : "NULL",
                    ops.recv != nullptr ? "present" : "NULL", missing_collectives);
}

}  // namespace

std::string printable(std::string_view text) {
  std::string shown;
  for (char c : text) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  return shown;
}

bool is_valid_backend_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxBackendNameLength) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

Result<NegotiatedBackend> check_negotiation(const pg_backend_negotiate_out_t& out,
                                            uint32_t min_version, uint32_t max_version) {
  if (out.version < min_version || out.version > max_version) {
    return make_error(PG_ERR_ABI_MISMATCH,
                      "plugin chose interface version {}, outside the range {}..{} this "
                      "libprocgroup speaks",
                      out.version, min_version, max_version);
  }

  if (out.name == nullptr) return make_error(PG_ERR_BACKEND, "plugin gave no name (NULL)");
  // strnlen: a name without a terminator must not walk us off into the plugin's memory.
  const std::string_view name(out.name, strnlen(out.name, kMaxBackendNameLength + 1));
  if (!is_valid_backend_name(name)) {
    return make_error(PG_ERR_BACKEND, "plugin name '{}' is not [a-z0-9_]+ of 1 to {} characters",
                      printable(name.substr(0, kMaxBackendNameLength)), kMaxBackendNameLength);
  }

  if (out.ops == nullptr) return make_error(PG_ERR_BACKEND, "plugin gave no function table");
  const pg_backend_ops_t& ops = *out.ops;
  if (ops.struct_size < PG_BACKEND_OPS_V1_SIZE) {
    return make_error(PG_ERR_ABI_MISMATCH,
                      "function table is {} bytes, interface version {} needs at least {}",
                      ops.struct_size, out.version, PG_BACKEND_OPS_V1_SIZE);
  }
  PG_RETURN_IF_ERROR(check_required_entries(ops));

  NegotiatedBackend result;
  result.version = out.version;
  result.name = std::string(name);
  if (out.description != nullptr) {
    result.description.assign(out.description, strnlen(out.description, kMaxDescriptionLength));
  }
  result.ops = out.ops;
  if (ops.struct_size >= PG_BACKEND_OPS_SPLIT_SIZE) result.group_split = ops.group_split;
  if (ops.struct_size >= PG_BACKEND_OPS_ON_COMPLETE_SIZE)
    result.work_on_complete = ops.work_on_complete;

  uint32_t present_ops = 0;
  for (const kit::OpInfo& e : kit::kOps) {
    if (kit::table_entry(ops, e.op) != nullptr) present_ops |= 1u << e.op;
  }
  result.native_ops = mask_capability("native_ops", out.native_ops, kKnownOpsMask, result.warnings);
  if (out.native_ops == ~0u) {
    result.native_ops = present_ops;  // "everything": whatever the table has
  } else if ((result.native_ops & ~present_ops) != 0) {
    // The core would call a NULL entry for these; emulating them is the safe reading.
    result.warnings.push_back(fmt::format(
        "native_ops claims bits 0x{:x} whose table entries are NULL; they will be emulated",
        result.native_ops & ~present_ops));
    result.native_ops &= present_ops;
  }
  result.native_dtypes =
      mask_capability("native_dtypes", out.native_dtypes, kKnownDtypesMask, result.warnings);
  result.native_reduce_ops = mask_capability("native_reduce_ops", out.native_reduce_ops,
                                             kKnownReduceOpsMask, result.warnings);
  result.devices = mask_capability("devices", out.devices, kKnownDevicesMask, result.warnings);
  return result;
}

}  // namespace procgroup::detail
