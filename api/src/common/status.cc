#include "common/status.h"

#include <exception>
#include <new>

namespace procgroup::detail {
namespace {
thread_local std::string t_last_error;
}  // namespace

const char* status_name(pg_status_t code) {
  switch (code) {
    case PG_OK: return "PG_OK";
    case PG_PENDING: return "PG_PENDING";
    case PG_ERR_INVALID_ARGUMENT: return "PG_ERR_INVALID_ARGUMENT";
    case PG_ERR_UNSUPPORTED: return "PG_ERR_UNSUPPORTED";
    case PG_ERR_TIMEOUT: return "PG_ERR_TIMEOUT";
    case PG_ERR_PEER_LOST: return "PG_ERR_PEER_LOST";
    case PG_ERR_ABORTED: return "PG_ERR_ABORTED";
    case PG_ERR_MISMATCH: return "PG_ERR_MISMATCH";
    case PG_ERR_BACKEND_NOT_FOUND: return "PG_ERR_BACKEND_NOT_FOUND";
    case PG_ERR_ABI_MISMATCH: return "PG_ERR_ABI_MISMATCH";
    case PG_ERR_BACKEND: return "PG_ERR_BACKEND";
    case PG_ERR_STORE: return "PG_ERR_STORE";
    case PG_ERR_AUTH: return "PG_ERR_AUTH";
    case PG_ERR_OUT_OF_MEMORY: return "PG_ERR_OUT_OF_MEMORY";
    case PG_ERR_CONFIG: return "PG_ERR_CONFIG";
    case PG_ERR_INTERNAL: return "PG_ERR_INTERNAL";
    default: return "PG_UNKNOWN_STATUS";
  }
}

std::string Status::to_string() const {
  if (ok()) return "PG_OK";
  return fmt::format("{}: {}", status_name(code_), message_);
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_));
}

void set_last_error(std::string_view message) { t_last_error.assign(message); }

void clear_last_error() {
  if (!t_last_error.empty()) t_last_error.clear();
}

const char* last_error() { return t_last_error.c_str(); }

pg_status_t report(const Status& status) noexcept {
  try {
    if (!status.ok() && status.code() != PG_PENDING) set_last_error(status.message());
  } catch (...) {
    // Out of memory while copying a message: the code alone must still get through.
  }
  return status.code();
}

pg_status_t report_exception(const char* function) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return report(Status(PG_ERR_OUT_OF_MEMORY, fmt::format("{}: out of memory", function)));
  } catch (const std::exception& e) {
    return report(
        Status(PG_ERR_INTERNAL, fmt::format("{}: unexpected exception: {}", function, e.what())));
  } catch (...) {
    return report(Status(PG_ERR_INTERNAL, fmt::format("{}: unexpected exception", function)));
  }
}

}  // namespace procgroup::detail
