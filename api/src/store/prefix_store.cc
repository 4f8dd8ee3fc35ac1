// A view of another store whose keys all start with a prefix, so that groups sharing one
// store (e.g. "pg/world/", "pg/world/split/1/") never see each other's keys.
#include <vector>

#include "store/store.h"
#include "store/store_protocol.h"

namespace procgroup::detail {
namespace {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix)) {}

  Status set(std::string_view key, std::span<const uint8_t> value) override {
    PG_RETURN_IF_ERROR(validate_key(key));
    return base_->set(full(key), value);
  }
  Result<Bytes> get(std::string_view key, Millis timeout) override {
    PG_RETURN_IF_ERROR(validate_key(key));
    return base_->get(full(key), timeout);
  }
  Result<int64_t> add(std::string_view key, int64_t delta) override {
    PG_RETURN_IF_ERROR(validate_key(key));
    return base_->add(full(key), delta);
  }
  Result<Bytes> compare_set(std::string_view key, std::span<const uint8_t> expected,
                            std::span<const uint8_t> desired) override {
    PG_RETURN_IF_ERROR(validate_key(key));
    return base_->compare_set(full(key), expected, desired);
  }
  Result<bool> remove(std::string_view key) override {
    PG_RETURN_IF_ERROR(validate_key(key));
    return base_->remove(full(key));
  }
  Status wait(std::span<const std::string> keys, Millis timeout) override {
    return base_->wait(full(keys), timeout);
  }
  Result<bool> check(std::span<const std::string> keys) override {
    return base_->check(full(keys));
  }

 private:
  std::string full(std::string_view key) const {
    std::string out = prefix_;
    out += key;
    return out;
  }
  std::vector<std::string> full(std::span<const std::string> keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& key : keys) out.push_back(full(key));
    return out;
  }

  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace

std::shared_ptr<Store> make_prefix_store(std::shared_ptr<Store> base, std::string prefix) {
  return std::make_shared<PrefixStore>(std::move(base), std::move(prefix));
}

}  // namespace procgroup::detail
