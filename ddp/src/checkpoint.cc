// Collective checkpoint save and load: root does the file work, then tells every rank the
// outcome in one fixed-size broadcast, so a failure on root is an error everywhere, not a hang.
#include "procgroup/ddp/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "device.h"
#include "host_collective.h"
#include "procgroup/ddp/broadcast.h"
#include "procgroup/ddp/error.h"

namespace procgroup::ddp {
namespace {

constexpr size_t kOutcomeBytes = 512;
constexpr int64_t kNotFound = -1;

struct Outcome {
  int64_t status = PG_OK;  // PG_OK, kNotFound, or the failure's pg_status_t
  std::string message;
};

// A device to stage the outcome through on backends without CPU buffers: the first CUDA
// tensor's (every rank passes the same list).
detail::Exec staging_device(std::span<const NamedTensor> tensors) {
  for (const NamedTensor& t : tensors) {
    if (t.tensor.device.type != PG_DEVICE_CPU) return {t.tensor.device, nullptr};
  }
  return {};
}

Outcome share(const Group& group, int root, const Outcome& mine, const detail::Exec& via) {
  std::vector<uint8_t> wire(kOutcomeBytes, 0);
  std::memcpy(wire.data(), &mine.status, sizeof mine.status);
  std::memcpy(wire.data() + 8, mine.message.data(),
              std::min(mine.message.size(), kOutcomeBytes - 9));
  detail::host_broadcast(group, std::span(wire), root, via);
  Outcome out;
  std::memcpy(&out.status, wire.data(), sizeof out.status);
  const char* text = reinterpret_cast<const char*>(wire.data() + 8);
  out.message.assign(text, strnlen(text, kOutcomeBytes - 8));
  return out;
}

Outcome attempt(auto&& fn) {
  try {
    fn();
    return {};
  } catch (const procgroup::Error& e) {
    // Keep the bare message: the outer error adds its own status and "ddp: " prefix.
    std::string text = e.what();
    for (const std::string& prefix :
         {std::string(pg_status_name(e.status())) + ": ", std::string("ddp: ")}) {
      if (text.starts_with(prefix)) text.erase(0, prefix.size());
    }
    return {e.status(), text};
  } catch (const std::exception& e) {
    return {PG_ERR_INVALID_ARGUMENT, e.what()};
  }
}

[[noreturn]] void throw_outcome(const Outcome& o, int root, const char* what) {
  throw Error(static_cast<pg_status_t>(o.status),
              std::string(what) + " failed on rank " + std::to_string(root) + ": " + o.message);
}

}  // namespace

void save_checkpoint(const Group& group, const std::filesystem::path& path,
                     std::span<const NamedTensor> tensors, int root) {
  Outcome mine;
  if (group.rank() == root) mine = attempt([&] { write_checkpoint_file(path, tensors); });
  const Outcome shared = share(group, root, mine, staging_device(tensors));
  if (shared.status != PG_OK) throw_outcome(shared, root, "checkpoint save");
}

bool load_checkpoint(const Group& group, const std::filesystem::path& path,
                     std::span<const NamedTensor> tensors, int root) {
  Outcome mine;
  if (group.rank() == root) {
    if (!std::filesystem::exists(path)) {
      mine.status = kNotFound;
    } else {
      mine = attempt([&] { restore(read_checkpoint_file(path), tensors); });
    }
  }
  const Outcome shared = share(group, root, mine, staging_device(tensors));
  if (shared.status == kNotFound) return false;
  if (shared.status != PG_OK) throw_outcome(shared, root, "checkpoint load");
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const NamedTensor& t : tensors) refs.push_back(t.tensor);
  broadcast_tensors(group, refs, root);
  // The broadcast completes on the legacy default stream: make the values visible to
  // every stream, as after a plain cudaMemcpy.
  for (const TensorRef& t : refs) detail::synchronize_device(t.device);
  return true;
}

}  // namespace procgroup::ddp
