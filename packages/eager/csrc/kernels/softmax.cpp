// Softmax with half_to_float, which CUDA computes and the CPU refuses: a
// float16 input (for softmax also bfloat16, as torch's meta kernels accept)
// gives a float32 result, computed in float32 as CUDA's kernel accumulates;
// the backward, given that float32 gradient, returns the input's dtype. Every
// other call is the CPU's kernel through the generic one, as a hot op.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <torch/library.h>

#include "../generic/hot_ops.h"

namespace openreg::eager {
namespace {

template <bool kLog>
at::Tensor widened(const at::Tensor& self) {
  if constexpr (kLog) {
    TORCH_CHECK(self.scalar_type() == at::kHalf, "conversion is supported for Half type only");
  } else {
    TORCH_CHECK(self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16,
                "conversion is supported for Half and BFloat16 types only");
  }
  return self.to(at::kFloat);
}

template <class Op, bool kLog>
at::Tensor forward(const at::Tensor& self, int64_t dim, bool half_to_float) {
  return half_to_float ? run_hot<Op>(widened<kLog>(self), dim, false) : run_hot<Op>(self, dim, false);
}

template <class Op, bool kLog>
at::Tensor& forward_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  return half_to_float ? run_hot<Op>(widened<kLog>(self), dim, false, out) : run_hot<Op>(self, dim, false, out);
}

// The backward of a half_to_float forward: a float32 gradient of a float16 or bfloat16 input.
bool of_half_to_float(const at::Tensor& grad, at::ScalarType input_dtype) {
  return grad.scalar_type() == at::kFloat && (input_dtype == at::kHalf || input_dtype == at::kBFloat16);
}

template <class Op>
at::Tensor backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim, at::ScalarType input_dtype) {
  if (!of_half_to_float(grad, input_dtype)) return run_hot<Op>(grad, output, dim, input_dtype);
  return run_hot<Op>(grad, output, dim, at::kFloat).to(input_dtype);
}

template <class Op, class OutOp>
at::Tensor& backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim, at::ScalarType input_dtype,
                         at::Tensor& out) {
  if (!of_half_to_float(grad, input_dtype)) return run_hot<OutOp>(grad, output, dim, input_dtype, out);
  const at::Tensor result = backward<Op>(grad, output, dim, input_dtype);
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace at::_ops;
  m.impl("_softmax", TORCH_FN((forward<_softmax, false>)));
  m.impl("_softmax.out", TORCH_FN((forward_out<_softmax_out, false>)));
  m.impl("_log_softmax", TORCH_FN((forward<_log_softmax, true>)));
  m.impl("_log_softmax.out", TORCH_FN((forward_out<_log_softmax_out, true>)));
  m.impl("_softmax_backward_data", TORCH_FN(backward<_softmax_backward_data>));
  m.impl("_softmax_backward_data.out", TORCH_FN((backward_out<_softmax_backward_data, _softmax_backward_data_out>)));
  m.impl("_log_softmax_backward_data", TORCH_FN(backward<_log_softmax_backward_data>));
  m.impl("_log_softmax_backward_data.out",
         TORCH_FN((backward_out<_log_softmax_backward_data, _log_softmax_backward_data_out>)));
}

}  // namespace openreg::eager
