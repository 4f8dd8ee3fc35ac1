// cuda_ops.h — the CUDA implementation of Ops (ops.h): GPU memory, cuBLAS sgemm for the
// linear layers, cuda_kernels.cu for the rest, everything on the legacy default stream (the
// stream ddp and the NCCL backend order their work after when given none). Built only with
// CUDA (PROCGROUP_HAVE_CUDA); make_ops("cuda", ...) is the way in.
//
//   std::unique_ptr<Ops> ops = make_cuda_ops(local_rank, local_world_size);  // cudaSetDevice
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "ops.h"

namespace fashion_mnist {

// Selects and initialises the device; std::runtime_error (see make_ops) when there is none.
std::unique_ptr<Ops> make_cuda_ops(int local_rank, int local_world_size);

// Throws std::runtime_error "CUDA error in <what>: <CUDA's message>" unless status is success.
void check_cuda(cudaError_t status, const char* what);

// Per-rank batch norm on GPU memory allocated from ops (a CUDA Ops), in kernels that follow
// layers.cc's LocalBatchNorm (the synchronised one is ddp's: make_sync_batch_norm, ops.h).
std::unique_ptr<BatchNorm> make_cuda_local_batch_norm(const Ops& ops, int channels);

}  // namespace fashion_mnist
