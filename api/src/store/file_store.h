// A store in a directory shared by the processes of one host (file:///abs/path). Each key
// is one file, written to a temporary file and renamed into place, so readers see a value
// whole or not at all. add, compare_set, set and remove run under flock() on a lock file,
// so read-modify-write is atomic across processes and threads. get and wait poll with
// backoff (1 ms growing to 50 ms) until their timeout.
//
//   PG_ASSIGN_OR_RETURN(auto store, FileStore::open("/tmp/job42", Millis(30000)));
//   PG_ASSIGN_OR_RETURN(int64_t arrived, store->add("arrived", 1));
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "store/socket_util.h"
#include "store/store.h"

namespace procgroup::detail {

class FileStore final : public Store {
 public:
  // Creates dir (and its parents) if missing. lock_timeout bounds waiting for the lock.
  static Result<std::unique_ptr<FileStore>> open(std::string dir, Millis lock_timeout);

  Status set(std::string_view key, std::span<const uint8_t> value) override;
  Result<Bytes> get(std::string_view key, Millis timeout) override;
  Result<int64_t> add(std::string_view key, int64_t delta) override;
  Result<Bytes> compare_set(std::string_view key, std::span<const uint8_t> expected,
                            std::span<const uint8_t> desired) override;
  Result<bool> remove(std::string_view key) override;
  Status wait(std::span<const std::string> keys, Millis timeout) override;
  Result<bool> check(std::span<const std::string> keys) override;

  // The file that holds key: "k.<escaped key>", or "h.<sha256 hex>" for long keys.
  std::string path_of(std::string_view key) const;

 private:
  FileStore(std::string dir, Millis lock_timeout)
      : dir_(std::move(dir)), lock_timeout_(lock_timeout) {}
  // An exclusive flock on dir/.lock; released when the returned fd closes.
  Result<UniqueFd> lock(std::string_view what) const;
  // The value at key, or nullopt when absent.
  Result<std::optional<Bytes>> read(std::string_view key) const;
  Status write(std::string_view key, std::span<const uint8_t> value) const;
  Result<bool> exists(std::string_view key) const;
  Status error(std::string_view what, std::string_view detail) const;

  std::string dir_;
  Millis lock_timeout_;
};

}  // namespace procgroup::detail
