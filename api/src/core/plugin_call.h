// Calling into a plugin: clear this thread's error first (so a stale message is never
// blamed on the plugin), catch anything a C++ plugin lets escape, and turn a non-OK code
// into a Status carrying the plugin's set_error message.
#pragma once

#include <exception>
#include <string_view>

#include "common/deadline.h"
#include "common/status.h"
#include "core/host_services.h"

namespace procgroup::detail {

// Whether a plugin's return code is one it may give: a known pg_status_t, and PG_PENDING
// only from work_test and work_wait (procgroup_backend.h). Anything else becomes
// PG_ERR_BACKEND (unexpected_plugin_status), so it fails, and aborts the group, like any
// backend failure, and never reaches the user as a status they cannot interpret.
inline bool plugin_may_return(pg_status_t code, std::string_view entry) {
  if (code == PG_PENDING) return entry == "work_test" || entry == "work_wait";
  return code >= PG_OK && code <= PG_ERR_INTERNAL;
}

template <class Call>
Status call_plugin(std::string_view backend, std::string_view entry, Call&& call) {
  clear_last_error();
  pg_status_t code;
  try {
    code = call();
  } catch (const std::exception& e) {
    return make_error(PG_ERR_BACKEND, "backend '{}' threw from {}: {}", backend, entry, e.what());
  } catch (...) {
    return make_error(PG_ERR_BACKEND, "backend '{}' threw from {}", backend, entry);
  }
  if (code == PG_OK) return ok_status();
  if (!plugin_may_return(code, entry)) [[unlikely]]
    return unexpected_plugin_status(code, backend, entry);
  if (code == PG_PENDING) return Status(code, "");
  return backend_failure(code, backend, entry);
}

// One look at a backend work: work_test for wait_for 0, else work_wait up to wait_for.
// PG_PENDING while it runs; a failure carries the plugin's message.
inline Status poll_backend_work(std::string_view backend, const pg_backend_ops_t& ops,
                                pg_backend_work_t work, Millis wait_for) {
  return call_plugin(backend, "work_wait", [&] {
    return wait_for.count() == 0 ? ops.work_test(work) : ops.work_wait(work, wait_for.count());
  });
}

}  // namespace procgroup::detail
