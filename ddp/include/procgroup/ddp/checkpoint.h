// checkpoint.h — saving and resuming training state (model and optimizer tensors).
//
// Rank 0 writes; every rank resumes by rank 0 reading and broadcasting. Files are written
// atomically: into a temporary file in the same directory, fsync'ed, then renamed over the
// old checkpoint (and the directory fsync'ed), so a crash at any moment leaves either the
// old or the new checkpoint, never a torn one.
//
//   std::vector<ddp::NamedTensor> state = {{"fc.weight", ddp::TensorRef::of(std::span(w))},
//                                          {"sgd.fc.weight.momentum", ...},
//                                          {"step", ddp::TensorRef::of(std::span(&step, 1))}};
//   if (ddp::load_checkpoint(group, "ckpt.bin", state)) std::printf("resumed\n");
//   ... train ...
//   ddp::save_checkpoint(group, "ckpt.bin", state);
//
// File format, version 1 (little-endian):
//   header   "PGDDPCKP" (8 bytes) | u32 version = 1 | u32 reserved = 0 | u64 tensor count
//   tensor   u32 name length | name (UTF-8, no NUL, at most 4096 bytes) | i32 dtype
//            (pg_dtype_t) | u32 reserved = 0 | u64 element count | the elements
//   trailer  u32 CRC-32 (IEEE 802.3 polynomial, as zlib's crc32) of every byte before it |
//            "PGDDPEND" (8 bytes)
// A reader rejects anything but a regular file (a FIFO would block, /dev/zero never end),
// any other magic or version, a bad checksum, a size that does not match the file, or
// trailing bytes. The CRC catches corruption, not forgery: a program must still check the
// values it restores (counters in range, consistent with its run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "procgroup/ddp/tensor.h"
#include "procgroup/procgroup.hpp"

namespace procgroup::ddp {

struct NamedTensor {
  std::string name;
  TensorRef tensor;
};

// A tensor read from a file, owning its bytes.
struct CheckpointEntry {
  std::string name;
  pg_dtype_t dtype = PG_DTYPE_INVALID;
  uint64_t numel = 0;
  std::vector<unsigned char> data;
};

constexpr uint32_t kCheckpointVersion = 1;

// Local file operations; ddp::Error (PG_ERR_INVALID_ARGUMENT) naming the file on failure.
void write_checkpoint_file(const std::filesystem::path& path, std::span<const NamedTensor> tensors);
std::vector<CheckpointEntry> read_checkpoint_file(const std::filesystem::path& path);
// Copies entries into the tensors by name; each tensor must be present with the same dtype
// and element count (entries the tensors do not name are ignored).
void restore(std::span<const CheckpointEntry> entries, std::span<const NamedTensor> tensors);

// Collective. root writes; every rank returns only once the file is in place, and every rank
// throws if root failed to write.
void save_checkpoint(const Group& group, const std::filesystem::path& path,
                     std::span<const NamedTensor> tensors, int root = 0);
// Collective. root reads and checks the file, then broadcasts the tensors. false on every
// rank when root finds no file; ddp::Error on every rank when it is unreadable.
bool load_checkpoint(const Group& group, const std::filesystem::path& path,
                     std::span<const NamedTensor> tensors, int root = 0);

// CRC-32 (reflected 0xEDB88320), chainable: crc32(b, crc32(a)) == crc32(a + b).
uint32_t crc32(const void* data, size_t bytes, uint32_t crc = 0);

}  // namespace procgroup::ddp
