// idx.h — reading Fashion-MNIST (or MNIST) from its IDX files, gzip-compressed or not.
//
// IDX: a big-endian header (two zero bytes, a type byte, the number of dimensions, then one
// u32 per dimension) followed by the elements. Images are u8 n x 28 x 28, labels u8 n.
// Debian's dataset-fashion-mnist installs the four files under /usr/share/datasets/fashion-mnist.
//
//   FashionMnist data = load_fashion_mnist(kDefaultDataDir);   // DataError if missing
//   std::vector<float> x(data.train.pixels);
//   data.train.normalized(0, x.data());                        // 784 standardised pixels
//   int label = data.train.labels[0];
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace fashion_mnist {

inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";
inline constexpr const char* kDataPackage = "dataset-fashion-mnist";
inline constexpr int kClasses = 10;

// Missing, unreadable or malformed data; the message names the file and what to do.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;  // prod(dims) elements, row-major
};

// Reads an IDX file of unsigned bytes (type 0x08) through zlib, which also reads plain files.
IdxArray read_idx(const std::filesystem::path& path);
// Writes one (gzip-compressed when the name ends in .gz); for tests and small copies.
void write_idx(const std::filesystem::path& path, const IdxArray& array);

// One split as stored (bytes); normalized() gives a model input: pixels scaled to [0, 1],
// then standardised with Fashion-MNIST's training mean and standard deviation.
struct Dataset {
  static constexpr float kMean = 0.2860f;
  static constexpr float kStd = 0.3530f;
  int64_t size = 0;
  int rows = 0, cols = 0;       // 28 x 28
  int pixels = 0;               // rows x cols: 784
  std::vector<uint8_t> images;  // size x pixels
  std::vector<uint8_t> labels;  // size, each in 0..9
  void normalized(int64_t i, float* out) const;
};

struct FashionMnist {
  Dataset train, test;
};

// Loads train-* and t10k-* from dir ("<name>.gz" or "<name>"). limit > 0 keeps the first
// limit samples of a split. DataError, naming the package, when the files are absent; naming
// the file and the fault when a split is empty, images and labels disagree in number, a
// label is not a class, or the two splits' images differ in shape.
FashionMnist load_fashion_mnist(const std::filesystem::path& dir, int64_t train_limit = 0,
                                int64_t test_limit = 0);
Dataset load_split(const std::filesystem::path& dir, const std::string& prefix, int64_t limit);

}  // namespace fashion_mnist
