// The checkpoint file: round trip of every dtype, atomic replacement, and rejection of
// corrupted, truncated, foreign and newer files with a clear error.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "procgroup/ddp/checkpoint.h"
#include "procgroup/ddp/error.h"
#include "subprocess.h"

namespace procgroup::ddp {
namespace {

namespace fs = std::filesystem;
using procgroup::testing::TempDir;

struct State {
  std::vector<float> w{1.5f, -2.0f, 3.25f};
  std::vector<double> m{0.125, 1e300};
  std::vector<Half> h{{0x3c00}, {0x7bff}};
  std::vector<BFloat16> b{{0x3f80}};
  std::vector<int64_t> step{42};
  std::vector<int8_t> i8{-3, 4};
  std::vector<uint8_t> u8{};
  std::vector<int32_t> i32{7, 8, 9};
  std::vector<NamedTensor> tensors() {
    return {{"w", TensorRef::of(std::span(w))},       {"m", TensorRef::of(std::span(m))},
            {"h", TensorRef::of(std::span(h))},       {"b", TensorRef::of(std::span(b))},
            {"step", TensorRef::of(std::span(step))}, {"i8", TensorRef::of(std::span(i8))},
            {"u8", TensorRef::of(std::span(u8))},     {"i32", TensorRef::of(std::span(i32))}};
  }
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::vector<char> bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::vector<char>& data) {
  std::ofstream(p, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

TEST(DdpCheckpointFile, Crc32MatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32("123456789", 9), 0xcbf43926u);
  EXPECT_EQ(crc32("56789", 5, crc32("1234", 4)), 0xcbf43926u);
}

TEST(DdpCheckpointFile, RoundTripsEveryDtypeAndLeavesNoTemporaryFile) {
  TempDir dir;
  const fs::path path = dir.path() / "ckpt.bin";
  State saved;
  write_checkpoint_file(path, saved.tensors());
  State loaded;
  loaded.w.assign(3, 0);
  loaded.m.assign(2, 0);
  loaded.step = {0};
  loaded.i32.assign(3, 0);
  restore(read_checkpoint_file(path), loaded.tensors());
  EXPECT_EQ(loaded.w, saved.w);
  EXPECT_EQ(loaded.m, saved.m);
  EXPECT_EQ(loaded.step, saved.step);
  EXPECT_EQ(loaded.i32, saved.i32);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
  const auto entries = read_checkpoint_file(path);
  ASSERT_EQ(entries.size(), 8u);
  EXPECT_EQ(entries[2].name, "h");
  EXPECT_EQ(entries[2].dtype, PG_DTYPE_F16);
  EXPECT_EQ(entries[2].numel, 2u);
}

TEST(DdpCheckpointFile, ReplacesAnOldCheckpointAndIgnoresStaleTemporaries) {
  TempDir dir;
  const fs::path path = dir.path() / "ckpt.bin";
  State s;
  write_checkpoint_file(path, s.tensors());
  write_bytes(dir.path() / "ckpt.bin.tmp-1-2", {'j', 'u', 'n', 'k'});  // a crashed writer's
  s.step = {43};
  write_checkpoint_file(path, s.tensors());
  State loaded;
  restore(read_checkpoint_file(path), loaded.tensors());
  EXPECT_EQ(loaded.step[0], 43);
}

TEST(DdpCheckpointFile, EveryFlippedByteIsDetected) {
  TempDir dir;
  const fs::path path = dir.path() / "ckpt.bin";
  State s;
  write_checkpoint_file(path, s.tensors());
  const std::vector<char> good = bytes_of(path);
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<char> bad = good;
    bad[i] ^= 0x10;
    write_bytes(path, bad);
    EXPECT_NE(error_of([&] { read_checkpoint_file(path); }), "no error") << "byte " << i;
  }
  write_bytes(path, good);
  State t;
  EXPECT_NO_THROW(restore(read_checkpoint_file(path), t.tensors()));
}

TEST(DdpCheckpointFile, ClearErrors) {
  TempDir dir;
  const fs::path path = dir.path() / "ckpt.bin";
  EXPECT_NE(error_of([&] { read_checkpoint_file(path); }).find("cannot open"), std::string::npos);
  State s;
  write_checkpoint_file(path, s.tensors());
  std::vector<char> good = bytes_of(path);

  std::vector<char> truncated(good.begin(), good.end() - 20);
  write_bytes(path, truncated);
  EXPECT_NE(error_of([&] { read_checkpoint_file(path); }).find("truncated"), std::string::npos);

  std::vector<char> foreign = good;
  foreign[0] = 'X';
  write_bytes(path, foreign);
  EXPECT_NE(error_of([&] { read_checkpoint_file(path); }).find("bad magic"), std::string::npos);

  std::vector<char> flipped = good;
  flipped[40] ^= 1;
  write_bytes(path, flipped);
  EXPECT_NE(error_of([&] { read_checkpoint_file(path); }).find("checksum mismatch"),
            std::string::npos);

  // A newer version with a valid checksum: refused by version, not by checksum.
  std::vector<char> newer = good;
  newer[8] = 2;
  const size_t body = newer.size() - 12;
  const uint32_t crc = crc32(newer.data(), body);
  std::memcpy(newer.data() + body, &crc, 4);
  write_bytes(path, newer);
  EXPECT_NE(error_of([&] { read_checkpoint_file(path); }).find("version 2"), std::string::npos);

  write_bytes(path, good);
  std::vector<float> wrong(4);
  const std::vector<NamedTensor> mismatched = {{"w", TensorRef::of(std::span(wrong))}};
  EXPECT_NE(error_of([&] {
              restore(read_checkpoint_file(path), mismatched);
            }).find("'w' is f32 x 3, expected f32 x 4"),
            std::string::npos);
  const std::vector<NamedTensor> absent = {{"nope", TensorRef::of(std::span(wrong))}};
  EXPECT_NE(error_of([&] { restore(read_checkpoint_file(path), absent); }).find("no tensor 'nope'"),
            std::string::npos);
}

TEST(DdpCheckpointFile, AnythingButARegularFileIsRefusedWithoutReadingIt) {
  TempDir dir;
  const fs::path fifo = dir.path() / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // In a child bounded in time and memory: the old reader blocked on the FIFO forever and
  // read /dev/zero until memory ran out.
  const auto refused = [](const fs::path& p, const std::string& kind) {
    return procgroup::testing::run_in_child(
        [&] {
          const std::string e = error_of([&] { read_checkpoint_file(p); });
          return e.find("is " + kind + ", not a checkpoint file") != std::string::npos ? 0 : 1;
        },
        10);
  };
  for (const auto& [path, kind] : {std::pair<fs::path, std::string>{fifo, "a FIFO"},
                                   {"/dev/zero", "a character device"},
                                   {dir.path(), "a directory"}}) {
    const auto r = refused(path, kind);
    EXPECT_EQ(r.exit_code, 0) << path << ": signal " << r.term_signal << " (14: blocked)";
    EXPECT_LT(r.peak_rss_mib, 256) << path;
  }
}

TEST(DdpCheckpointFile, UnwritableDirectoryIsAClearError) {
  State s;
  EXPECT_NE(error_of([&] {
              write_checkpoint_file("/nonexistent-dir/ckpt.bin", s.tensors());
            }).find("cannot create"),
            std::string::npos);
}

}  // namespace
}  // namespace procgroup::ddp
