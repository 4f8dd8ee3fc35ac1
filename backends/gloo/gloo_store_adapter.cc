// gloo::rendezvous::Store over pg_host_store_t (see gloo_store_adapter.h).
#include "gloo_store_adapter.h"

#include <algorithm>
#include <utility>

namespace procgroup::gloo_backend {
namespace {

std::string describe(pg_status_t status) {
  switch (status) {
    case PG_ERR_TIMEOUT: return "timed out";
    case PG_ERR_STORE: return "store unreachable or bad reply (rank 0 hosts it: is it alive?)";
    case PG_ERR_AUTH: return "store authentication failed";
    case PG_ERR_OUT_OF_MEMORY: return "out of memory";
    default: return "store error " + std::to_string(status);
  }
}

}  // namespace

StoreAdapter::StoreAdapter(const pg_host_store_t* store, std::string prefix,
                           std::chrono::milliseconds timeout)
    : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  const std::string full = prefix_ + key;
  const pg_status_t st = store_->set(store_->ctx, full.c_str(), data.data(), data.size());
  if (st != PG_OK) {
    throw StoreError(st, "store set of '" + full + "' failed: " + describe(st));
  }
}

std::vector<char> StoreAdapter::fetch(const std::string& key, std::chrono::milliseconds timeout) {
  const std::string full = prefix_ + key;
  void* value = nullptr;
  uint64_t length = 0;
  const pg_status_t st = store_->get(store_->ctx, full.c_str(),
                                     std::max<int64_t>(timeout.count(), 0), &value, &length);
  if (st != PG_OK) {
    if (value != nullptr) store_->free_value(store_->ctx, value);
    throw StoreError(st, "store get of '" + full + "' (waiting up to " +
                             std::to_string(timeout.count()) + " ms) failed: " + describe(st));
  }
  std::vector<char> out;
  if (length > 0 && value != nullptr) {
    const char* bytes = static_cast<const char*>(value);
    out.assign(bytes, bytes + length);
  }
  if (value != nullptr) store_->free_value(store_->ctx, value);
  return out;
}

bool StoreAdapter::exists(const std::string& key) {
  try {
    fetch(key, std::chrono::milliseconds(0));
  } catch (const StoreError& e) {
    if (e.status() == PG_ERR_TIMEOUT) return false;
    throw;
  }
  return true;
}

int64_t StoreAdapter::add(const std::string& key, int64_t delta) {
  const std::string full = prefix_ + key;
  int64_t result = 0;
  const pg_status_t st = store_->add(store_->ctx, full.c_str(), delta, &result);
  if (st != PG_OK) {
    throw StoreError(st, "store add to '" + full + "' failed: " + describe(st));
  }
  return result;
}

std::vector<char> StoreAdapter::get(const std::string& key) { return fetch(key, timeout_); }

void StoreAdapter::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void StoreAdapter::wait(const std::vector<std::string>& keys,
                        const std::chrono::milliseconds& timeout) {
  // The host store's get waits for a key; waiting for all keys is waiting for each in
  // turn against one deadline.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& key : keys) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    fetch(key, std::max(left, std::chrono::milliseconds(0)));
  }
}

}  // namespace procgroup::gloo_backend
