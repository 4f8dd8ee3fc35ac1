#include "tensors.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

namespace procgroup::torch_backend {
namespace {

#define PG_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||     \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// The dtypes procgroup reduces; others travel as bytes or are refused for reductions.
pg_dtype_t reducible_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return PG_DTYPE_F32;
    case at::kDouble: return PG_DTYPE_F64;
    case at::kHalf: return PG_DTYPE_F16;
    case at::kBFloat16: return PG_DTYPE_BF16;
    case at::kChar: return PG_DTYPE_I8;
    case at::kByte: return PG_DTYPE_U8;
    case at::kInt: return PG_DTYPE_I32;
    case at::kLong: return PG_DTYPE_I64;
    default: return PG_DTYPE_INVALID;
  }
}

void* current_cuda_stream(const at::Tensor& tensor, const char* call) {
#if PG_TORCH_AT_LEAST(2, 2)
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  return impl->getStream(tensor.device()).native_handle();
#else
  (void)tensor;
  TORCH_CHECK_NOT_IMPLEMENTED(false, "procgroup ", call,
                              ": CUDA tensors need torch >= 2.2 (this is torch ",
                              TORCH_VERSION_MAJOR, ".", TORCH_VERSION_MINOR,
                              ", which cannot name its current CUDA stream to a plugin)");
#endif
}

}  // namespace

pg_buffer_t to_buffer(const at::Tensor& tensor, Use use, const char* call) {
  TORCH_CHECK(tensor.defined(), "procgroup ", call, ": the tensor is undefined");
  TORCH_CHECK(!tensor.is_sparse(), "procgroup ", call, ": sparse tensors are not supported");
  TORCH_CHECK(tensor.is_contiguous(), "procgroup ", call,
              ": tensors must be contiguous (got sizes ", tensor.sizes(), ", strides ",
              tensor.strides(), "); call .contiguous() first");
  TORCH_CHECK(tensor.device().is_cpu() || tensor.device().is_cuda(), "procgroup ", call,
              ": tensors must be on cpu or cuda, not ", tensor.device());
  pg_buffer_t b = PG_BUFFER_INIT;
  b.data = tensor.data_ptr();
  b.dtype = reducible_dtype(tensor.scalar_type());
  b.count = static_cast<uint64_t>(tensor.numel());
  if (b.dtype == PG_DTYPE_INVALID) {
    TORCH_CHECK(use == Use::kMove, "procgroup ", call, ": cannot reduce tensors of dtype ",
                tensor.scalar_type(), " (procgroup reduces float32, float64, float16, bfloat16, "
                "int8, uint8, int32 and int64)");
    b.dtype = PG_DTYPE_U8;
    b.count *= tensor.element_size();
  }
  if (tensor.device().is_cuda()) {
    b.device_type = PG_DEVICE_CUDA;
    b.device_index = tensor.device().index();
    b.stream = current_cuda_stream(tensor, call);
  }
  return b;
}

const at::Tensor& single_tensor(const std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "procgroup ", call, ": takes one tensor per call, got ",
              tensors.size(), " (one device per process)");
  return tensors[0];
}

void check_same_layout(const std::vector<at::Tensor>& tensors, const at::Tensor& like,
                       const char* call) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "procgroup ", call,
                ": every tensor must have dtype ", like.scalar_type(), ", got ",
                t.scalar_type());
    TORCH_CHECK(t.numel() == like.numel(), "procgroup ", call,
                ": every tensor must have as many elements as the input (", like.numel(),
                "), got ", t.numel());
    TORCH_CHECK(t.device() == like.device(), "procgroup ", call, ": every tensor must be on ",
                like.device(), ", got ", t.device());
  }
}

void check_pair(const at::Tensor& big, const char* big_name, const at::Tensor& small,
                int64_t times, const char* call) {
  TORCH_CHECK(big.numel() == times * small.numel(), "procgroup ", call, ": the ", big_name,
              " must hold ", times, " x ", small.numel(), " elements, got ", big.numel());
  TORCH_CHECK(big.scalar_type() == small.scalar_type() && big.device() == small.device(),
              "procgroup ", call, ": output and input must share dtype and device (got ",
              big.scalar_type(), " on ", big.device(), " and ", small.scalar_type(), " on ",
              small.device(), ")");
}

pg_reduce_op_t to_reduce_op(const c10d::ReduceOp& op, const at::Tensor& tensor,
                            const char* call) {
  const bool is_bool = tensor.scalar_type() == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      TORCH_CHECK(!is_bool, "procgroup ", call, ": SUM of bool tensors is undefined; use MAX");
      return PG_REDUCE_SUM;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!is_bool, "procgroup ", call, ": AVG of bool tensors is undefined");
      return PG_REDUCE_AVG;
    case c10d::ReduceOp::PRODUCT: return PG_REDUCE_PROD;
    case c10d::ReduceOp::MIN: return PG_REDUCE_MIN;
    case c10d::ReduceOp::MAX: return PG_REDUCE_MAX;
    default: {
      const char* name = op.op_ == c10d::ReduceOp::BAND   ? "BAND"
                         : op.op_ == c10d::ReduceOp::BOR  ? "BOR"
                         : op.op_ == c10d::ReduceOp::BXOR ? "BXOR"
                                                          : "PREMUL_SUM";
      TORCH_CHECK_NOT_IMPLEMENTED(false, "procgroup ", call, ": reduce op ", name,
                                  " is not supported; procgroup reduces with SUM, AVG, PRODUCT, "
                                  "MIN and MAX");
    }
  }
}

pg_op_options_t op_options(std::chrono::milliseconds timeout) {
  pg_op_options_t o = PG_OP_OPTIONS_INIT;
  // kUnsetTimeout is -1 ms: the group timeout, as procgroup's 0.
  o.timeout_ms = timeout.count() > 0 ? timeout.count() : 0;
  return o;
}

at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const at::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void unflatten_into(const at::Tensor& flat, std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (at::Tensor& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view_as(t));
    offset += t.numel();
  }
}

}  // namespace procgroup::torch_backend
