#include "store/file_store.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "store/store_protocol.h"

namespace procgroup::detail {
namespace {

constexpr Millis kFirstPoll{1};
constexpr Millis kMaxPoll{50};
// The lock is held for microseconds; waiting for it backs off more finely than get().
constexpr std::chrono::microseconds kFirstLockPoll{20};
constexpr std::chrono::microseconds kMaxLockPoll{2000};
constexpr size_t kMaxEscapedName = 200;  // below NAME_MAX (255) with room for the prefix

bool plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

Status make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return make_error(PG_ERR_STORE, "cannot create the file store directory {}: {}", prefix,
                        errno_text(errno));
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return make_error(PG_ERR_STORE, "file store path {} is not a directory", dir);
  }
  return ok_status();
}

// Sleeps the next backoff step, bounded by the deadline; false once it has passed.
template <class Duration>
bool backoff(Duration& step, Duration max, const Deadline& deadline) {
  if (deadline.expired()) return false;
  auto left = std::chrono::duration_cast<Duration>(deadline.at() - Clock::now());
  std::this_thread::sleep_for(std::max(Duration(0), std::min(step, left)));
  step = std::min(step * 2, max);
  return true;
}

}  // namespace

Result<std::unique_ptr<FileStore>> FileStore::open(std::string dir, Millis lock_timeout) {
  if (dir.empty() || dir.front() != '/') {
    return make_error(PG_ERR_CONFIG, "file store path '{}' is not absolute", dir);
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  PG_RETURN_IF_ERROR(make_dirs(dir));
  std::unique_ptr<FileStore> store(new FileStore(std::move(dir), lock_timeout));
  // Fails early (read-only or foreign directory) instead of at the first add.
  PG_ASSIGN_OR_RETURN(UniqueFd probe, store->lock("open"));
  return store;
}

std::string FileStore::path_of(std::string_view key) const {
  std::string name = "k.";
  for (char c : key) {
    if (plain(c)) {
      name.push_back(c);
    } else {
      name += fmt::format("%{:02x}", static_cast<unsigned char>(c));
    }
  }
  if (name.size() > kMaxEscapedName) {
    uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const uint8_t*>(key.data()), key.size(), digest);
    name = "h.";
    for (uint8_t b : digest) name += fmt::format("{:02x}", b);
  }
  return dir_ + "/" + name;
}

Status FileStore::error(std::string_view what, std::string_view detail) const {
  return make_error(PG_ERR_STORE, "{} on file store {}: {}", what, dir_, detail);
}

Result<UniqueFd> FileStore::lock(std::string_view what) const {
  std::string path = dir_ + "/.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) return error(what, fmt::format("cannot open {}: {}", path, errno_text(errno)));
  // A fresh open file description per call: flock then excludes threads of this process too.
  Deadline deadline = Deadline::after(lock_timeout_);
  auto step = kFirstLockPoll;
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return fd;
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return error(what, fmt::format("flock({}): {}", path, errno_text(errno)));
    }
    if (!backoff(step, kMaxLockPoll, deadline)) {
      return make_error(PG_ERR_TIMEOUT, "{} on file store {}: lock {} still held after {} ms", what,
                        dir_, path, lock_timeout_.count());
    }
  }
}

Result<std::optional<Bytes>> FileStore::read(std::string_view key) const {
  std::string path = path_of(key);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<Bytes>();
    return error("read", fmt::format("cannot open {}: {}", path, errno_text(errno)));
  }
  Bytes value;
  uint8_t chunk[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n > 0) {
      value.insert(value.end(), chunk, chunk + n);
      if (value.size() > kMaxValueBytes) return error("read", path + " exceeds the value limit");
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    return error("read", fmt::format("reading {}: {}", path, errno_text(errno)));
  }
  return std::optional<Bytes>(std::move(value));
}

Result<bool> FileStore::exists(std::string_view key) const {
  std::string path = path_of(key);
  if (::access(path.c_str(), F_OK) == 0) return true;
  if (errno == ENOENT) return false;
  return error("check", fmt::format("{}: {}", path, errno_text(errno)));
}

Status FileStore::write(std::string_view key, std::span<const uint8_t> value) const {
  std::string tmp = dir_ + "/.tmp.XXXXXX";
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd.valid()) {
    return error("set", fmt::format("cannot create a temporary file: {}", errno_text(errno)));
  }
  size_t done = 0;
  while (done < value.size()) {
    ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return error("set", fmt::format("writing {}: {}", tmp, errno_text(err)));
    }
    done += static_cast<size_t>(n);
  }
  fd.reset();
  std::string path = path_of(key);
  // rename() is atomic: readers see the old value or the new one, never a partial file.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return error("set", fmt::format("rename to {}: {}", path, errno_text(err)));
  }
  return ok_status();
}

Status FileStore::set(std::string_view key, std::span<const uint8_t> value) {
  PG_RETURN_IF_ERROR(validate_key(key));
  PG_RETURN_IF_ERROR(validate_value(key, value.size()));
  // Under the lock so a concurrent add's read-modify-write cannot undo this set.
  PG_ASSIGN_OR_RETURN(UniqueFd held, lock("set"));
  return write(key, value);
}

Result<Bytes> FileStore::get(std::string_view key, Millis timeout) {
  PG_RETURN_IF_ERROR(validate_key(key));
  Deadline deadline = Deadline::after(std::max(timeout, Millis(0)));
  Millis step = kFirstPoll;
  for (;;) {
    PG_ASSIGN_OR_RETURN(std::optional<Bytes> value, read(key));
    if (value) return std::move(*value);
    if (!backoff(step, kMaxPoll, deadline)) {
      return make_error(PG_ERR_TIMEOUT, "get({}) on file store {}: key {} was not set within {} ms",
                        printable_key(key), dir_, printable_key(key), timeout.count());
    }
  }
}

Result<int64_t> FileStore::add(std::string_view key, int64_t delta) {
  PG_RETURN_IF_ERROR(validate_key(key));
  PG_ASSIGN_OR_RETURN(UniqueFd held, lock("add"));
  PG_ASSIGN_OR_RETURN(std::optional<Bytes> current, read(key));
  PG_ASSIGN_OR_RETURN(int64_t sum, apply_add(key, current ? &*current : nullptr, delta));
  PG_RETURN_IF_ERROR(write(key, counter_bytes(sum)));
  return sum;
}

Result<Bytes> FileStore::compare_set(std::string_view key, std::span<const uint8_t> expected,
                                     std::span<const uint8_t> desired) {
  PG_RETURN_IF_ERROR(validate_key(key));
  PG_RETURN_IF_ERROR(validate_value(key, desired.size()));
  PG_ASSIGN_OR_RETURN(UniqueFd held, lock("compare_set"));
  PG_ASSIGN_OR_RETURN(std::optional<Bytes> current, read(key));
  if (!compare_matches(current ? &*current : nullptr, expected)) {
    return current ? std::move(*current) : Bytes();
  }
  PG_RETURN_IF_ERROR(write(key, desired));
  return Bytes(desired.begin(), desired.end());
}

Result<bool> FileStore::remove(std::string_view key) {
  PG_RETURN_IF_ERROR(validate_key(key));
  PG_ASSIGN_OR_RETURN(UniqueFd held, lock("remove"));
  std::string path = path_of(key);
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return error("remove", fmt::format("unlink {}: {}", path, errno_text(errno)));
}

Status FileStore::wait(std::span<const std::string> keys, Millis timeout) {
  for (const auto& key : keys) PG_RETURN_IF_ERROR(validate_key(key));
  Deadline deadline = Deadline::after(std::max(timeout, Millis(0)));
  Millis step = kFirstPoll;
  std::vector<std::string> missing(keys.begin(), keys.end());
  for (;;) {
    std::vector<std::string> still;
    for (const auto& key : missing) {
      PG_ASSIGN_OR_RETURN(bool present, exists(key));
      if (!present) still.push_back(key);
    }
    if (still.empty()) return ok_status();
    missing = std::move(still);
    if (!backoff(step, kMaxPoll, deadline)) {
      return make_error(PG_ERR_TIMEOUT, "wait on file store {}: keys {} were not set within {} ms",
                        dir_, printable_keys(missing), timeout.count());
    }
  }
}

Result<bool> FileStore::check(std::span<const std::string> keys) {
  for (const auto& key : keys) {
    PG_RETURN_IF_ERROR(validate_key(key));
    PG_ASSIGN_OR_RETURN(bool present, exists(key));
    if (!present) return false;
  }
  return true;
}

}  // namespace procgroup::detail
