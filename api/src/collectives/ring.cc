// The two ring phases. In step s rank r talks only to its neighbours (r+1 receives what r
// sends), so every link carries 1/size of the data per step and all links are busy.
#include <cstring>
#include <utility>
#include <vector>

#include "collectives/collective_util.h"
#include "collectives/reduce.h"
#include "common/dtype.h"

namespace procgroup::detail {

Status ring_reduce_scatter(Transport& t, const void* input, const Partition& blocks,
                           void* out_block, pg_dtype_t dtype, pg_reduce_op_t op, uint64_t tag_base,
                           uint64_t first_step, const char* algorithm) {
  const int n = t.size();
  const int r = t.rank();
  const size_t elem = dtype_size(dtype);
  const uint8_t* in = byte_ptr(input);
  auto block = [&](int b) { return in + blocks.offset(b) * elem; };
  auto block_bytes = [&](int b) { return blocks.count(b) * elem; };
  if (n == 1) {
    if (out_block != input && block_bytes(0) != 0) std::memcpy(out_block, input, block_bytes(0));
    return ok_status();
  }
  const int right = mod(r + 1, n);
  const int left = mod(r - 1, n);
  // Double buffer: the partial sent in step s is the one reduced in step s-1, while step
  // s's receive lands in the other buffer.
  std::vector<uint8_t> send_buf(blocks.max_count() * elem);
  std::vector<uint8_t> recv_buf(blocks.max_count() * elem);
  for (int s = 0; s < n - 1; ++s) {
    // Block b starts at rank b+1 and travels right, picking up each rank's contribution,
    // so it arrives complete at rank b after size-1 steps.
    const int b_send = mod(r - s - 1, n);
    const int b_recv = mod(r - s - 2, n);
    IoBatch io(t);
    io.recv(left, recv_buf.data(), block_bytes(b_recv), step_tag(tag_base, first_step + s));
    io.send(right, s == 0 ? block(b_send) : send_buf.data(), block_bytes(b_send),
            step_tag(tag_base, first_step + s));
    PG_RETURN_IF_ERROR(io.wait(algorithm, static_cast<uint64_t>(s)));
    // partial (ranks b+1 .. r-1 in ring order) op mine: one fixed order per block.
    PG_RETURN_IF_ERROR(
        reduce_into(recv_buf.data(), block(b_recv), blocks.count(b_recv), dtype, op));
    std::swap(send_buf, recv_buf);
  }
  // After the last swap send_buf holds this rank's finished block. Written only now, so an
  // out_block aliasing input block r was still intact when it was read above.
  if (block_bytes(r) != 0) std::memcpy(out_block, send_buf.data(), block_bytes(r));
  return ok_status();
}

Status ring_allgather(Transport& t, void* buffer, const Partition& blocks, size_t elem_size,
                      uint64_t tag_base, uint64_t first_step, const char* algorithm) {
  const int n = t.size();
  const int r = t.rank();
  uint8_t* buf = byte_ptr(buffer);
  const int right = mod(r + 1, n);
  const int left = mod(r - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    // Forward the block received in the previous step (own block first); it is complete
    // and never written again, so sending from the user's buffer is safe.
    const int b_send = mod(r - s, n);
    const int b_recv = mod(r - s - 1, n);
    IoBatch io(t);
    io.recv(left, buf + blocks.offset(b_recv) * elem_size, blocks.count(b_recv) * elem_size,
            step_tag(tag_base, first_step + s));
    io.send(right, buf + blocks.offset(b_send) * elem_size, blocks.count(b_send) * elem_size,
            step_tag(tag_base, first_step + s));
    PG_RETURN_IF_ERROR(io.wait(algorithm, static_cast<uint64_t>(s)));
  }
  return ok_status();
}

}  // namespace procgroup::detail
