// A private in-process store: a map under a mutex, with a condition variable that wakes
// get() and wait() when a key is set.
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "store/store.h"
#include "store/store_protocol.h"

namespace procgroup::detail {
namespace {

class MemoryStore final : public Store {
 public:
  Status set(std::string_view key, std::span<const uint8_t> value) override {
    PG_RETURN_IF_ERROR(validate_key(key));
    PG_RETURN_IF_ERROR(validate_value(key, value.size()));
    std::lock_guard<std::mutex> lock(mu_);
    data_[std::string(key)] = Bytes(value.begin(), value.end());
    changed_.notify_all();
    return ok_status();
  }

  Result<Bytes> get(std::string_view key, Millis timeout) override {
    PG_RETURN_IF_ERROR(validate_key(key));
    std::string k(key);
    std::unique_lock<std::mutex> lock(mu_);
    if (!wait_locked(lock, std::span<const std::string>(&k, 1), timeout)) {
      return make_error(PG_ERR_TIMEOUT, "get({}) on memory store: key {} was not set within {} ms",
                        printable_key(key), printable_key(key), timeout.count());
    }
    return data_.at(k);
  }

  Result<int64_t> add(std::string_view key, int64_t delta) override {
    PG_RETURN_IF_ERROR(validate_key(key));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(std::string(key));
    PG_ASSIGN_OR_RETURN(int64_t sum,
                        apply_add(key, it == data_.end() ? nullptr : &it->second, delta));
    data_[std::string(key)] = counter_bytes(sum);
    changed_.notify_all();
    return sum;
  }

  Result<Bytes> compare_set(std::string_view key, std::span<const uint8_t> expected,
                            std::span<const uint8_t> desired) override {
    PG_RETURN_IF_ERROR(validate_key(key));
    PG_RETURN_IF_ERROR(validate_value(key, desired.size()));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(std::string(key));
    const Bytes* current = it == data_.end() ? nullptr : &it->second;
    if (!compare_matches(current, expected)) return current ? *current : Bytes();
    data_[std::string(key)] = Bytes(desired.begin(), desired.end());
    changed_.notify_all();
    return Bytes(desired.begin(), desired.end());
  }

  Result<bool> remove(std::string_view key) override {
    PG_RETURN_IF_ERROR(validate_key(key));
    std::lock_guard<std::mutex> lock(mu_);
    return data_.erase(std::string(key)) > 0;
  }

  Status wait(std::span<const std::string> keys, Millis timeout) override {
    for (const auto& key : keys) PG_RETURN_IF_ERROR(validate_key(key));
    std::unique_lock<std::mutex> lock(mu_);
    if (!wait_locked(lock, keys, timeout)) {
      std::vector<std::string> missing;
      for (const auto& key : keys) {
        if (!data_.contains(key)) missing.push_back(key);
      }
      return make_error(PG_ERR_TIMEOUT, "wait on memory store: keys {} were not set within {} ms",
                        printable_keys(missing), timeout.count());
    }
    return ok_status();
  }

  Result<bool> check(std::span<const std::string> keys) override {
    for (const auto& key : keys) PG_RETURN_IF_ERROR(validate_key(key));
    std::lock_guard<std::mutex> lock(mu_);
    return all_present(keys);
  }

 private:
  bool all_present(std::span<const std::string> keys) const {
    return std::all_of(keys.begin(), keys.end(),
                       [&](const std::string& k) { return data_.contains(k); });
  }

  bool wait_locked(std::unique_lock<std::mutex>& lock, std::span<const std::string> keys,
                   Millis timeout) {
    Deadline deadline = Deadline::after(std::clamp(timeout, Millis(0), Millis(INT32_MAX)));
    return changed_.wait_until(lock, deadline.at(), [&] { return all_present(keys); });
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::unordered_map<std::string, Bytes> data_;
};

}  // namespace

std::shared_ptr<Store> make_memory_store() { return std::make_shared<MemoryStore>(); }

}  // namespace procgroup::detail
