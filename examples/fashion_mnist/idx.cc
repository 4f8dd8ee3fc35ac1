#include "idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>

namespace fashion_mnist {
namespace {

constexpr uint8_t kTypeU8 = 0x08;
// Fashion-MNIST's largest file holds 47 MB; a file claiming more than this is not a data set
// this example can train on.
constexpr uint64_t kMaxElements = uint64_t{1} << 32;
// Pixels per image (Fashion-MNIST: 784); the model's input width is an int.
constexpr uint64_t kMaxPixels = uint64_t{1} << 24;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

std::string gz_error(gzFile f, const std::filesystem::path& path) {
  int code = 0;
  const char* msg = gzerror(f, &code);
  if (code == Z_ERRNO) return path.string() + ": " + std::strerror(errno);
  return path.string() + ": " + (msg != nullptr ? msg : "read error");
}

// Reads exactly n bytes; false at a clean or early end of file.
bool read_exact(gzFile f, void* out, size_t n, const std::filesystem::path& path) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
    const int got = gzread(f, p, chunk);
    if (got < 0) throw DataError(gz_error(f, path));
    if (got == 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

// Reads up to n bytes into out, growing it a chunk at a time; returns how many were read.
uint64_t read_up_to(gzFile f, std::vector<uint8_t>& out, uint64_t n,
                    const std::filesystem::path& path) {
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  uint64_t done = 0;
  while (done < n) {
    const uint64_t want = std::min(kChunk, n - done);
    try {
      out.resize(done + want);
    } catch (const std::bad_alloc&) {  // under a memory limit: say where, not just bad_alloc
      throw DataError(path.string() + ": out of memory after " + std::to_string(done) + " of the " +
                      std::to_string(n) + " bytes of data the header claims");
    }
    const int got = gzread(f, out.data() + done, static_cast<unsigned>(want));
    if (got < 0) throw DataError(gz_error(f, path));
    done += static_cast<uint64_t>(got);
    if (got == 0) break;
  }
  out.resize(done);
  return done;
}

uint32_t big_endian(const unsigned char* b) {
  return uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | uint32_t{b[3]};
}

std::filesystem::path find_file(const std::filesystem::path& dir, const std::string& name) {
  for (const std::string& candidate : {name + ".gz", name}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir / candidate, ec)) return dir / candidate;
  }
  const bool default_dir = dir == std::filesystem::path(kDefaultDataDir);
  std::string hint = default_dir ? std::string("install the Debian package ") + kDataPackage +
                                       " (apt-get install " + kDataPackage +
                                       "), or pass --data DIR for another copy"
                                 : std::string(
                                       "pass --data DIR holding the Fashion-MNIST files "
                                       "(Debian's ") +
                                       kDataPackage + " installs them in " + kDefaultDataDir + ")";
  throw DataError("no Fashion-MNIST file " + (dir / (name + ".gz")).string() + " (nor " + name +
                  " uncompressed): " + hint);
}

}  // namespace

IdxArray read_idx(const std::filesystem::path& path) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw DataError(path.string() + ": cannot open: " + std::strerror(errno));
  gzbuffer(f.get(), 1 << 17);
  unsigned char head[4];
  if (!read_exact(f.get(), head, 4, path))
    throw DataError(path.string() + ": not an IDX file (empty)");
  if (head[0] != 0 || head[1] != 0 || head[3] == 0 || head[3] > 4) {
    throw DataError(path.string() + ": not an IDX file (bad magic number)");
  }
  if (head[2] != kTypeU8) {
    throw DataError(path.string() + ": IDX element type " + std::to_string(head[2]) +
                    " is not unsigned byte (8)");
  }
  IdxArray a;
  uint64_t count = 1;
  for (int d = 0; d < head[3]; ++d) {
    unsigned char b[4];
    if (!read_exact(f.get(), b, 4, path)) throw DataError(path.string() + ": truncated header");
    a.dims.push_back(big_endian(b));
    count *= a.dims.back();
    if (count > kMaxElements) {
      throw DataError(path.string() + ": dimensions too large (over " +
                      std::to_string(kMaxElements >> 30) + " GiB of elements)");
    }
  }
  // The header is only a claim: grow the array as the data arrives, so a tiny file that
  // claims billions of elements costs a chunk, not the claim.
  const uint64_t got = read_up_to(f.get(), a.data, count, path);
  if (got != count) {
    throw DataError(path.string() + ": truncated: the header claims " + std::to_string(count) +
                    " bytes of data, the file has " + std::to_string(got));
  }
  unsigned char extra;
  if (read_exact(f.get(), &extra, 1, path)) {
    throw DataError(path.string() + ": trailing bytes after " + std::to_string(count) +
                    " elements");
  }
  return a;
}

void write_idx(const std::filesystem::path& path, const IdxArray& a) {
  const bool gz = path.extension() == ".gz";
  GzFile f(gzopen(path.c_str(), gz ? "wb6" : "wbT"));
  if (!f) throw DataError(path.string() + ": cannot create: " + std::strerror(errno));
  std::vector<unsigned char> head = {0, 0, kTypeU8, static_cast<unsigned char>(a.dims.size())};
  for (uint32_t d : a.dims) {
    for (int shift = 24; shift >= 0; shift -= 8) head.push_back((d >> shift) & 0xff);
  }
  const auto put = [&](const void* p, size_t n) {
    if (n > 0 && gzwrite(f.get(), p, static_cast<unsigned>(n)) != static_cast<int>(n)) {
      throw DataError(gz_error(f.get(), path));
    }
  };
  put(head.data(), head.size());
  put(a.data.data(), a.data.size());
  if (gzclose(f.release()) != Z_OK) throw DataError(path.string() + ": write failed");
}

Dataset load_split(const std::filesystem::path& dir, const std::string& prefix, int64_t limit) {
  const auto images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const auto labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  const IdxArray images = read_idx(images_path);
  const IdxArray labels = read_idx(labels_path);
  if (images.dims.size() != 3 || labels.dims.size() != 1) {
    throw DataError(images_path.string() + ": expected n x rows x cols images and n labels");
  }
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(images_path.string() + " has " + std::to_string(images.dims[0]) +
                    " images but " + labels_path.string() + " has " +
                    std::to_string(labels.dims[0]) + " labels");
  }
  // Nothing to train or test on would print a NaN loss and exit 0: refuse it here.
  if (images.dims[0] == 0 || images.dims[1] == 0 || images.dims[2] == 0) {
    throw DataError(images_path.string() + ": no samples (" + std::to_string(images.dims[0]) +
                    " images of " + std::to_string(images.dims[1]) + "x" +
                    std::to_string(images.dims[2]) + " pixels)");
  }
  Dataset d;
  d.size = images.dims[0];
  if (limit > 0 && limit < d.size) d.size = limit;
  const uint64_t pixels = uint64_t{images.dims[1]} * images.dims[2];
  if (pixels > kMaxPixels) {
    throw DataError(images_path.string() + ": images of " + std::to_string(images.dims[1]) + "x" +
                    std::to_string(images.dims[2]) + " pixels are larger than the " +
                    std::to_string(kMaxPixels) + " pixels this example takes");
  }
  d.rows = static_cast<int>(images.dims[1]);
  d.cols = static_cast<int>(images.dims[2]);
  d.pixels = static_cast<int>(pixels);
  d.images.assign(images.data.begin(), images.data.begin() + d.size * d.pixels);
  d.labels.assign(labels.data.begin(), labels.data.begin() + d.size);
  for (uint8_t l : d.labels) {
    if (l >= kClasses) {
      throw DataError(labels_path.string() + ": label " + std::to_string(l) + " is not in 0..9");
    }
  }
  return d;
}

void Dataset::normalized(int64_t i, float* out) const {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[v] = (static_cast<float>(v) / 255.0f - kMean) / kStd;
    return t;
  }();
  const uint8_t* p = images.data() + i * pixels;
  for (int k = 0; k < pixels; ++k) out[k] = table[p[k]];
}

FashionMnist load_fashion_mnist(const std::filesystem::path& dir, int64_t train_limit,
                                int64_t test_limit) {
  FashionMnist data{load_split(dir, "train", train_limit), load_split(dir, "t10k", test_limit)};
  // The model's input width comes from the training images: test images of another shape
  // would be read out of bounds or scored as noise.
  if (data.train.rows != data.test.rows || data.train.cols != data.test.cols) {
    throw DataError("Fashion-MNIST files in " + dir.string() + " disagree: training images are " +
                    std::to_string(data.train.rows) + "x" + std::to_string(data.train.cols) +
                    " pixels, test images " + std::to_string(data.test.rows) + "x" +
                    std::to_string(data.test.cols));
  }
  return data;
}

}  // namespace fashion_mnist
