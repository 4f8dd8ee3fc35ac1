// torch tensors and options as procgroup buffers and op options. Every refusal is a
// c10::Error naming the torch call ("procgroup allreduce: ..."), raised before anything is
// sent, so a rank never gets a wrong answer from an input procgroup cannot take.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <vector>

#include "procgroup/procgroup.h"

namespace procgroup::torch_backend {

// How an op reads its tensors: reductions need the element type; data movement can carry
// any dtype as bytes (complex, int16, bool, ...).
enum class Use { kReduce, kMove };

// A contiguous CPU or CUDA tensor as a buffer (CUDA: on torch's current stream).
pg_buffer_t to_buffer(const at::Tensor& tensor, Use use, const char* call);

// The one tensor of a call that takes a list (procgroup runs one buffer per op).
const at::Tensor& single_tensor(const std::vector<at::Tensor>& tensors, const char* call);

// Every tensor has the dtype, size and device of the first: lists of a collective.
void check_same_layout(const std::vector<at::Tensor>& tensors, const at::Tensor& like,
                       const char* call);

// The two tensors of a one-buffer call (_allgather_base, _reduce_scatter_base,
// alltoall_base): the same dtype and device, and big holding `times` x small's elements.
void check_pair(const at::Tensor& big, const char* big_name, const at::Tensor& small,
                int64_t times, const char* call);

pg_reduce_op_t to_reduce_op(const c10d::ReduceOp& op, const at::Tensor& tensor, const char* call);

// The op's timeout (torch's kUnsetTimeout: the group's) and the other fields.
pg_op_options_t op_options(std::chrono::milliseconds timeout);

// One buffer holding the tensors back to back (a copy), and the copy back into them.
at::Tensor flatten(const std::vector<at::Tensor>& tensors);
void unflatten_into(const at::Tensor& flat, std::vector<at::Tensor>& tensors);

}  // namespace procgroup::torch_backend
