#include "collectives/transport.h"

namespace procgroup::detail {

Status wait_all(std::vector<Request>& requests) {
  Status first;
  for (Request& request : requests) {
    if (!request) continue;
    // Keep waiting after a failure: the caller may free or reuse the buffers on return.
    Status s = request->wait();
    if (!s.ok() && first.ok()) first = std::move(s);
  }
  requests.clear();
  return first;
}

}  // namespace procgroup::detail
