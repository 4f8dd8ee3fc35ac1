// The checkpoint file format (see checkpoint.h): atomic writing and checked reading.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <random>

#include "device.h"
#include "procgroup/ddp/checkpoint.h"
#include "procgroup/ddp/error.h"

static_assert(std::endian::native == std::endian::little,
              "the checkpoint writer stores integers in host order");

namespace procgroup::ddp {
namespace {

constexpr char kMagic[8] = {'P', 'G', 'D', 'D', 'P', 'C', 'K', 'P'};
constexpr char kEndMagic[8] = {'P', 'G', 'D', 'D', 'P', 'E', 'N', 'D'};
constexpr size_t kMaxName = 4096;

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

[[noreturn]] void file_error(const std::filesystem::path& path, const std::string& what) {
  throw Error(PG_ERR_INVALID_ARGUMENT, "checkpoint " + path.string() + ": " + what);
}

// Writes everything to fd, keeping the running CRC.
class Writer {
 public:
  Writer(int fd, const std::filesystem::path& path) : fd_(fd), path_(path) {}
  void bytes(const void* data, size_t n) {
    crc_ = crc32(data, n, crc_);
    raw(data, n);
  }
  template <class T>
  void value(T v) {
    bytes(&v, sizeof v);
  }
  void raw(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) file_error(path_, std::string("write failed: ") + std::strerror(errno));
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  uint32_t crc() const { return crc_; }

 private:
  int fd_;
  const std::filesystem::path& path_;
  uint32_t crc_ = 0;
};

// Reads the file's bytes with bounds checks.
class Reader {
 public:
  Reader(const std::vector<unsigned char>& data, const std::filesystem::path& path)
      : data_(data), path_(path) {}
  const unsigned char* take(uint64_t n) {
    if (n > data_.size() - at_) file_error(path_, "truncated (a record runs past the end)");
    const unsigned char* p = data_.data() + at_;
    at_ += n;
    return p;
  }
  template <class T>
  T value() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  size_t at() const { return at_; }

 private:
  const std::vector<unsigned char>& data_;
  const std::filesystem::path& path_;
  size_t at_ = 0;
};

std::filesystem::path temp_path_for(const std::filesystem::path& path) {
  // Unique per writer; O_EXCL turns a collision into an error rather than a shared file.
  std::random_device random;
  const uint64_t tag = (uint64_t{random()} << 32) ^ random();
  return path.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(tag);
}

void fsync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems refuse to open directories
  ::fsync(fd);
  ::close(fd);
}

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The whole file, which must be a regular one: /dev/zero would never end and a FIFO would
// block. O_NONBLOCK lets open return on a FIFO so fstat can refuse it; the read stops at the
// size fstat gave, so a file that grows meanwhile cannot make it unbounded.
std::vector<unsigned char> read_regular_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) file_error(path, std::string("cannot open: ") + std::strerror(errno));
  std::vector<unsigned char> data;
  try {
    struct stat st {};
    if (::fstat(fd, &st) != 0) file_error(path, std::string("stat: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) {
      file_error(path, std::string("is ") + file_kind(st.st_mode) + ", not a checkpoint file");
    }
    data.resize(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::read(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) file_error(path, std::string("read failed: ") + std::strerror(errno));
      if (n == 0) break;  // shrank while read: the checks below report it as truncated
      done += static_cast<size_t>(n);
    }
    data.resize(done);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return data;
}

}  // namespace

uint32_t crc32(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < bytes; ++i) crc = kCrcTable[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

void write_checkpoint_file(const std::filesystem::path& path,
                           std::span<const NamedTensor> tensors) {
  for (const NamedTensor& t : tensors) {
    if (t.name.empty() || t.name.size() > kMaxName)
      file_error(path, "bad tensor name '" + t.name + "'");
    if (element_size(t.tensor.dtype) == 0 || (t.tensor.numel > 0 && t.tensor.data == nullptr)) {
      file_error(path, "tensor '" + t.name + "' has no data or an invalid dtype");
    }
  }
  // CUDA tensors are written from host copies, taken once all their devices' streams are
  // idle, so work enqueued on any stream before this call is in the file.
  std::vector<std::vector<unsigned char>> host(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef& t = tensors[i].tensor;
    if (t.device.type == PG_DEVICE_CPU) continue;
    detail::check_device(t.device);
    detail::synchronize_device(t.device);
    host[i].resize(t.bytes());
    detail::to_host({t.device, nullptr}, host[i].data(), t.data, t.bytes());
  }
  const std::filesystem::path temp = temp_path_for(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) file_error(temp, std::string("cannot create: ") + std::strerror(errno));
  try {
    Writer w(fd, temp);
    w.bytes(kMagic, sizeof kMagic);
    w.value<uint32_t>(kCheckpointVersion);
    w.value<uint32_t>(0);
    w.value<uint64_t>(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const NamedTensor& t = tensors[i];
      w.value<uint32_t>(static_cast<uint32_t>(t.name.size()));
      w.bytes(t.name.data(), t.name.size());
      w.value<int32_t>(t.tensor.dtype);
      w.value<uint32_t>(0);
      w.value<uint64_t>(t.tensor.numel);
      w.bytes(host[i].empty() ? t.tensor.data : host[i].data(), t.tensor.bytes());
    }
    const uint32_t crc = w.crc();
    w.raw(&crc, sizeof crc);
    w.raw(kEndMagic, sizeof kEndMagic);
    if (::fsync(fd) != 0) file_error(temp, std::string("fsync failed: ") + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp.c_str());
    file_error(path, std::string("rename failed: ") + std::strerror(error));
  }
  fsync_directory(path.parent_path());
}

std::vector<CheckpointEntry> read_checkpoint_file(const std::filesystem::path& path) {
  const std::vector<unsigned char> data = read_regular_file(path);
  constexpr size_t kTrailer = 4 + sizeof kEndMagic;
  if (data.size() < sizeof kMagic + 16 + kTrailer) file_error(path, "too short to be a checkpoint");
  if (std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
    file_error(path, "not a checkpoint (bad magic)");
  if (std::memcmp(data.data() + data.size() - sizeof kEndMagic, kEndMagic, sizeof kEndMagic) != 0) {
    file_error(path, "truncated (no end marker)");
  }
  const size_t body = data.size() - kTrailer;
  uint32_t stored_crc;
  std::memcpy(&stored_crc, data.data() + body, sizeof stored_crc);
  if (crc32(data.data(), body) != stored_crc) file_error(path, "checksum mismatch (corrupted)");

  Reader r(data, path);
  r.take(sizeof kMagic);
  const auto version = r.value<uint32_t>();
  if (version != kCheckpointVersion) {
    file_error(path, "version " + std::to_string(version) + " (this build reads version " +
                         std::to_string(kCheckpointVersion) + ")");
  }
  r.value<uint32_t>();
  const auto count = r.value<uint64_t>();
  std::vector<CheckpointEntry> entries;
  for (uint64_t i = 0; i < count; ++i) {
    CheckpointEntry e;
    const auto name_len = r.value<uint32_t>();
    if (name_len == 0 || name_len > kMaxName) file_error(path, "bad name length");
    const unsigned char* name = r.take(name_len);
    e.name.assign(reinterpret_cast<const char*>(name), name_len);
    e.dtype = r.value<int32_t>();
    r.value<uint32_t>();
    e.numel = r.value<uint64_t>();
    const size_t esize = element_size(e.dtype);
    if (esize == 0) file_error(path, "tensor '" + e.name + "' has an invalid dtype");
    if (e.numel > (body - r.at()) / esize)
      file_error(path, "tensor '" + e.name + "' runs past the end");
    const unsigned char* bytes = r.take(e.numel * esize);
    e.data.assign(bytes, bytes + e.numel * esize);
    entries.push_back(std::move(e));
  }
  if (r.at() != body) file_error(path, "unexpected bytes after the last tensor");
  return entries;
}

void restore(std::span<const CheckpointEntry> entries, std::span<const NamedTensor> tensors) {
  // Check everything before copying anything, so a bad file leaves the tensors untouched.
  std::vector<const CheckpointEntry*> sources;
  for (const NamedTensor& t : tensors) {
    const CheckpointEntry* found = nullptr;
    for (const CheckpointEntry& e : entries) {
      if (e.name == t.name) found = &e;
    }
    if (found == nullptr) {
      throw Error(PG_ERR_INVALID_ARGUMENT, "checkpoint has no tensor '" + t.name + "'");
    }
    if (found->dtype != t.tensor.dtype || found->numel != t.tensor.numel) {
      throw Error(PG_ERR_INVALID_ARGUMENT,
                  "checkpoint tensor '" + t.name + "' is " + dtype_name(found->dtype) + " x " +
                      std::to_string(found->numel) + ", expected " + dtype_name(t.tensor.dtype) +
                      " x " + std::to_string(t.tensor.numel));
    }
    detail::check_device(t.tensor.device);
    sources.push_back(found);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorRef& t = tensors[i].tensor;
    if (sources[i]->data.empty()) continue;
    // CUDA: through the legacy default stream, complete on return (from_host waits).
    detail::from_host({t.device, nullptr}, t.data, sources[i]->data.data(),
                      sources[i]->data.size());
  }
}

}  // namespace procgroup::ddp
