#include "core/user_store.h"

#include <string>

#include "core/versioned_struct.h"

namespace procgroup::detail {
namespace {

constexpr size_t kStoreV1Size = offsetof(pg_store_t, error_message) + sizeof(void*);

class UserStore final : public Store {
 public:
  explicit UserStore(const pg_store_t& s) : s_(s) {}

  Status set(std::string_view key, std::span<const uint8_t> value) override {
    const std::string k(key);
    return checked("set", k, s_.set(s_.ctx, k.c_str(), value.data(), value.size()));
  }

  Result<Bytes> get(std::string_view key, Millis timeout) override {
    const std::string k(key);
    void* data = nullptr;
    uint64_t length = 0;
    PG_RETURN_IF_ERROR(checked("get", k, s_.get(s_.ctx, k.c_str(), timeout.count(), &data, &length)));
    if (data == nullptr && length > 0)
      return make_error(PG_ERR_STORE, "the caller's store: get({}) returned PG_OK with no value", k);
    const auto* bytes = static_cast<const uint8_t*>(data);
    Bytes out(bytes, bytes + (data == nullptr ? 0 : length));
    if (data != nullptr) s_.free_value(s_.ctx, data);
    return out;
  }

  Result<int64_t> add(std::string_view key, int64_t delta) override {
    const std::string k(key);
    int64_t result = 0;
    PG_RETURN_IF_ERROR(checked("add", k, s_.add(s_.ctx, k.c_str(), delta, &result)));
    return result;
  }

  Result<Bytes> compare_set(std::string_view key, std::span<const uint8_t>,
                            std::span<const uint8_t>) override {
    return make_error(PG_ERR_UNSUPPORTED,
                      "compare_set({}): pg_store_t offers no compare-and-set (procgroup's core "
                      "never needs one)",
                      key);
  }

  Result<bool> remove(std::string_view key) override {
    const std::string k(key);
    int32_t existed = 0;
    PG_RETURN_IF_ERROR(checked("check", k, s_.check(s_.ctx, k.c_str(), &existed)));
    PG_RETURN_IF_ERROR(checked("remove", k, s_.remove(s_.ctx, k.c_str())));
    return existed != 0;
  }

  // get() already waits for one key; waiting for several is waiting for each in turn
  // against one deadline.
  Status wait(std::span<const std::string> keys, Millis timeout) override {
    const Deadline deadline = Deadline::after(timeout);
    for (const std::string& key : keys) {
      void* data = nullptr;
      uint64_t length = 0;
      PG_RETURN_IF_ERROR(checked(
          "get", key, s_.get(s_.ctx, key.c_str(), deadline.remaining().count(), &data, &length)));
      if (data != nullptr) s_.free_value(s_.ctx, data);
    }
    return ok_status();
  }

  Result<bool> check(std::span<const std::string> keys) override {
    for (const std::string& key : keys) {
      int32_t exists = 0;
      PG_RETURN_IF_ERROR(checked("check", key, s_.check(s_.ctx, key.c_str(), &exists)));
      if (exists == 0) return false;
    }
    return true;
  }

 private:
  // The callback's status with its own words, or words naming the call.
  Status checked(const char* call, const std::string& key, pg_status_t code) const {
    if (code == PG_OK) return ok_status();
    const char* said = s_.error_message != nullptr ? s_.error_message(s_.ctx) : nullptr;
    if (code == PG_PENDING) code = PG_ERR_STORE;
    if (said != nullptr && *said != '\0')
      return make_error(code, "the caller's store: {}({}): {}", call, key, said);
    return make_error(code, "the caller's store: {}({}) failed with {}", call, key,
                      pg_status_name(code));
  }

  const pg_store_t s_;
};

}  // namespace

Result<std::shared_ptr<Store>> make_user_store(const pg_store_t& store) {
  pg_store_t defaults = PG_STORE_INIT;
  PG_ASSIGN_OR_RETURN(pg_store_t s,
                      read_versioned(store, kStoreV1Size, defaults, "pg_store_t", "PG_STORE_INIT"));
  const char* missing = s.set == nullptr          ? "set"
                        : s.get == nullptr        ? "get"
                        : s.free_value == nullptr ? "free_value"
                        : s.add == nullptr        ? "add"
                        : s.check == nullptr      ? "check"
                        : s.remove == nullptr     ? "remove"
                                                  : nullptr;
  if (missing != nullptr)
    return make_error(PG_ERR_INVALID_ARGUMENT, "pg_store_t: the '{}' callback is NULL", missing);
  return std::shared_ptr<Store>(std::make_shared<UserStore>(s));
}

}  // namespace procgroup::detail
