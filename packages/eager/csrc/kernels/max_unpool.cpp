// CUDA's max_unpool2d and max_unpool3d make their operands contiguous and
// write a contiguous result, which is what PyTorch's decomposition (followed by
// fake tensors and torch.compile) describes; the CPU's keep a channels-last
// input's layout. openreg hands the CPU kernel contiguous operands, as CUDA's
// kernel makes its own, and refuses a non-contiguous out= as CUDA does.
#include <ATen/ATen.h>
#include <ATen/ops/max_unpool2d_ops.h>
#include <ATen/ops/max_unpool3d_ops.h>
#include <torch/library.h>

#include "../generic/hot_ops.h"

namespace openreg::eager {
namespace {

using at::_ops::max_unpool2d;
using at::_ops::max_unpool2d_out;
using at::_ops::max_unpool3d;
using at::_ops::max_unpool3d_out;

void check_out(const at::Tensor& out) { TORCH_CHECK(out.is_contiguous(), "output must be contiguous"); }

at::Tensor unpool2d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef size) {
  return run_hot<max_unpool2d>(self.contiguous(), indices.contiguous(), size);
}

at::Tensor& unpool2d_out(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef size, at::Tensor& out) {
  check_out(out);
  return run_hot<max_unpool2d_out>(self.contiguous(), indices.contiguous(), size, out);
}

at::Tensor unpool3d(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef size, at::IntArrayRef stride,
                    at::IntArrayRef padding) {
  return run_hot<max_unpool3d>(self.contiguous(), indices.contiguous(), size, stride, padding);
}

at::Tensor& unpool3d_out(const at::Tensor& self, const at::Tensor& indices, c10::SymIntArrayRef size,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::Tensor& out) {
  check_out(out);
  return run_hot<max_unpool3d_out>(self.contiguous(), indices.contiguous(), size, stride, padding, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_unpool2d", TORCH_FN(unpool2d));
  m.impl("max_unpool2d.out", TORCH_FN(unpool2d_out));
  m.impl("max_unpool3d", TORCH_FN(unpool3d));
  m.impl("max_unpool3d.out", TORCH_FN(unpool3d_out));
}

}  // namespace openreg::eager
