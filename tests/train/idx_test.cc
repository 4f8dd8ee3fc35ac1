// Loading IDX files: gzip files written byte by byte here with zlib (not by the code under
// test), the normalisation, limits, and a clear error for every kind of bad or missing data.
#include "idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "subprocess.h"

namespace fashion_mnist {
namespace {

using procgroup::testing::ChildResult;
using procgroup::testing::run_in_child;
using procgroup::testing::TempDir;

void write_gz(const std::filesystem::path& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// IDX u8 header for the given dimensions, then the data.
std::vector<unsigned char> idx_bytes(std::vector<uint32_t> dims, std::vector<unsigned char> data) {
  std::vector<unsigned char> b = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims) {
    b.insert(b.end(), {static_cast<unsigned char>(d >> 24), static_cast<unsigned char>(d >> 16),
                       static_cast<unsigned char>(d >> 8), static_cast<unsigned char>(d)});
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// Three 2x2 images and their labels, as train-* files.
void write_tiny_split(const std::filesystem::path& dir, const std::string& prefix,
                      std::vector<unsigned char> labels = {7, 0, 9}) {
  write_gz(dir / (prefix + "-images-idx3-ubyte.gz"),
           idx_bytes({3, 2, 2}, {0, 255, 51, 102, 1, 2, 3, 4, 10, 20, 30, 40}));
  write_gz(dir / (prefix + "-labels-idx1-ubyte.gz"),
           idx_bytes({static_cast<uint32_t>(labels.size())}, labels));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no DataError)";
}

TEST(TrainIdx, ReadsAGzipFileWrittenByZlib) {
  TempDir dir;
  write_gz(dir.path() / "a.gz", idx_bytes({2, 3}, {1, 2, 3, 4, 5, 6}));
  const IdxArray a = read_idx(dir.path() / "a.gz");
  EXPECT_EQ(a.dims, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(a.data, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
}

TEST(TrainIdx, WriteThenReadRoundTripsCompressedAndPlain) {
  TempDir dir;
  IdxArray a{{4, 1, 2}, {9, 8, 7, 6, 5, 4, 3, 2}};
  for (const char* name : {"x.gz", "x.idx"}) {
    write_idx(dir.path() / name, a);
    const IdxArray b = read_idx(dir.path() / name);
    EXPECT_EQ(b.dims, a.dims) << name;
    EXPECT_EQ(b.data, a.data) << name;
  }
  // The .gz really is gzip (magic 1f 8b), the other one plain IDX.
  const std::string gz = procgroup::testing::read_file(dir.path() / "x.gz");
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_EQ(procgroup::testing::read_file(dir.path() / "x.idx").size(), 4 + 3 * 4 + 8u);
}

TEST(TrainIdx, LoadsASplitNormalisedWithItsLabels) {
  TempDir dir;
  write_tiny_split(dir.path(), "train");
  write_tiny_split(dir.path(), "t10k", {1, 2, 3});
  const FashionMnist data = load_fashion_mnist(dir.path());
  ASSERT_EQ(data.train.size, 3);
  EXPECT_EQ(data.train.pixels, 4);
  EXPECT_EQ(data.train.labels, (std::vector<uint8_t>{7, 0, 9}));
  EXPECT_EQ(data.test.labels, (std::vector<uint8_t>{1, 2, 3}));
  float x[4];
  data.train.normalized(0, x);
  EXPECT_NEAR(x[0], (0.0f - 0.2860f) / 0.3530f, 1e-6);
  EXPECT_NEAR(x[1], (1.0f - 0.2860f) / 0.3530f, 1e-6);
  EXPECT_NEAR(x[2], (0.2f - 0.2860f) / 0.3530f, 1e-6);

  const FashionMnist limited = load_fashion_mnist(dir.path(), 2, 1);
  EXPECT_EQ(limited.train.size, 2);
  EXPECT_EQ(limited.train.images.size(), 8u);
  EXPECT_EQ(limited.test.size, 1);
}

TEST(TrainIdx, MissingFilesNameTheDebianPackageAndTheDataFlag) {
  TempDir dir;
  const std::string e = error_of([&] { load_fashion_mnist(dir.path() / "nowhere"); });
  EXPECT_NE(e.find("train-images-idx3-ubyte.gz"), std::string::npos) << e;
  EXPECT_NE(e.find("dataset-fashion-mnist"), std::string::npos) << e;
  EXPECT_NE(e.find("--data"), std::string::npos) << e;
  // The test split alone missing is reported too.
  write_tiny_split(dir.path(), "train");
  const std::string t = error_of([&] { load_fashion_mnist(dir.path()); });
  EXPECT_NE(t.find("t10k-images-idx3-ubyte.gz"), std::string::npos) << t;
}

TEST(TrainIdx, MalformedFilesAreClearErrors) {
  TempDir dir;
  const auto p = dir.path() / "bad.gz";
  write_gz(p, {0x12, 0x34, 0x08, 0x01, 0, 0, 0, 1, 5});
  EXPECT_NE(error_of([&] { read_idx(p); }).find("bad magic"), std::string::npos);
  write_gz(p, idx_bytes({2}, {1, 2}));
  std::vector<unsigned char> wrong_type = idx_bytes({2}, {1, 2});
  wrong_type[2] = 0x0d;  // float
  write_gz(p, wrong_type);
  EXPECT_NE(error_of([&] { read_idx(p); }).find("not unsigned byte"), std::string::npos);
  write_gz(p, idx_bytes({5}, {1, 2}));
  EXPECT_NE(error_of([&] { read_idx(p); }).find("truncated"), std::string::npos);
  write_gz(p, idx_bytes({1}, {1, 2}));
  EXPECT_NE(error_of([&] { read_idx(p); }).find("trailing"), std::string::npos);
  write_gz(p, {});
  EXPECT_NE(error_of([&] { read_idx(p); }).find("empty"), std::string::npos);
}

TEST(TrainIdx, AHeaderClaimingMoreThanTheFileHoldsCostsOnlyWhatItHolds) {
  TempDir dir;
  const auto p = dir.path() / "liar.gz";
  // 2^31 labels claimed, 3 present: the error must come before 2 GiB are allocated.
  write_gz(p, idx_bytes({uint32_t{1} << 31}, {1, 2, 3}));
  const ChildResult r = run_in_child(
      [&] {
        const std::string e = error_of([&] { read_idx(p); });
        return e.find("claims 2147483648 bytes of data, the file has 3") != std::string::npos ? 0
                                                                                              : 1;
      },
      10);
  EXPECT_EQ(r.exit_code, 0) << "125: std::bad_alloc, 1: not the expected error";
  EXPECT_LT(r.peak_rss_mib, 256);
  // 16 GiB claimed by a 28-byte file: refused from the header alone.
  write_gz(p, idx_bytes({65536, 65536, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  const ChildResult big = run_in_child(
      [&] {
        return error_of([&] { read_idx(p); }).find("dimensions too large") != std::string::npos ? 0
                                                                                                : 1;
      },
      10);
  EXPECT_EQ(big.exit_code, 0) << "125: std::bad_alloc, 1: not the expected error";
  EXPECT_LT(big.peak_rss_mib, 256);
}

TEST(TrainIdx, RunningOutOfMemoryNamesTheFile) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "run_in_child caps no memory under a sanitizer";
#endif
  TempDir dir;
  const auto p = dir.path() / "big.gz";
  write_gz(p, idx_bytes({32 << 20}, std::vector<unsigned char>(32 << 20)));  // 32 MiB, real
  const ChildResult r = run_in_child(
      [&] {
        const std::string e = error_of([&] { read_idx(p); });
        return e.find("big.gz: out of memory after ") != std::string::npos ? 0 : 1;
      },
      10, 16);
  EXPECT_EQ(r.exit_code, 0) << "125: a bare std::bad_alloc";
}

TEST(TrainIdx, EmptySplitsAndSplitsOfDifferentShapesAreRefused) {
  TempDir dir;
  write_gz(dir.path() / "train-images-idx3-ubyte.gz", idx_bytes({0, 28, 28}, {}));
  write_gz(dir.path() / "train-labels-idx1-ubyte.gz", idx_bytes({0}, {}));
  EXPECT_NE(error_of([&] { load_split(dir.path(), "train", 0); }).find("no samples (0 images"),
            std::string::npos);
  write_gz(dir.path() / "train-images-idx3-ubyte.gz", idx_bytes({2, 0, 28}, {}));
  write_gz(dir.path() / "train-labels-idx1-ubyte.gz", idx_bytes({2}, {1, 2}));
  EXPECT_NE(error_of([&] { load_split(dir.path(), "train", 0); }).find("no samples"),
            std::string::npos);
  // Training images 2x2, test images 1x1: the model would be scored on noise.
  write_tiny_split(dir.path(), "train");
  write_gz(dir.path() / "t10k-images-idx3-ubyte.gz", idx_bytes({2, 1, 1}, {0, 255}));
  write_gz(dir.path() / "t10k-labels-idx1-ubyte.gz", idx_bytes({2}, {3, 4}));
  const std::string e = error_of([&] { load_fashion_mnist(dir.path()); });
  EXPECT_NE(e.find("training images are 2x2 pixels, test images 1x1"), std::string::npos) << e;
}

TEST(TrainIdx, InconsistentSplitsAreClearErrors) {
  TempDir dir;
  write_tiny_split(dir.path(), "train", {1, 2});  // 3 images, 2 labels
  EXPECT_NE(error_of([&] { load_split(dir.path(), "train", 0); }).find("has 3 images but"),
            std::string::npos);
  write_tiny_split(dir.path(), "train", {1, 2, 10});
  EXPECT_NE(error_of([&] { load_split(dir.path(), "train", 0); }).find("label 10"),
            std::string::npos);
}

}  // namespace
}  // namespace fashion_mnist
