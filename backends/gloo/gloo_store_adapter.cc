// gloo::rendezvous::Store over pg_host_store_t (see gloo_store_adapter.h).
#include "gloo_store_adapter.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace procgroup::gloo_backend {
namespace {

void throw_if_failed(const kit::Status& st) {
  if (!st.ok()) throw StoreError(st.code, st.message);
}

}  // namespace

StoreAdapter::StoreAdapter(const pg_host_store_t* store, std::string prefix,
                           std::chrono::milliseconds timeout)
    : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  throw_if_failed(store_.set(prefix_ + key, std::string_view(data.data(), data.size())));
}

std::vector<char> StoreAdapter::fetch(const std::string& key, std::chrono::milliseconds timeout) {
  std::string value;
  throw_if_failed(store_.get(prefix_ + key, timeout.count(), &value));
  return {value.begin(), value.end()};
}

bool StoreAdapter::exists(const std::string& key) {
  bool found = false;
  throw_if_failed(store_.exists(prefix_ + key, &found));
  return found;
}

int64_t StoreAdapter::add(const std::string& key, int64_t delta) {
  int64_t result = 0;
  throw_if_failed(store_.add(prefix_ + key, delta, &result));
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
