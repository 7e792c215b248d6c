// CUDA's int8 matmul (cuBLASLt's) takes only shapes it can tile: more than 16
// rows, and inner and column sizes that are positive multiples of 8, so code
// that quantises small batches fails there (int8 dynamic quantisation of a
// model's head, fed one row per sample). The CPU's kernel takes any shape:
// openreg makes CUDA's checks, with its messages, before the CPU's kernel.
#include <ATen/ATen.h>
#include <ATen/ops/_int_mm_ops.h>
#include <torch/library.h>

#include "../generic/hot_ops.h"

namespace openreg::eager {
namespace {

at::Tensor& int_mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  TORCH_CHECK(self.dim() == 2, "Expected self to be of dimension 2 but got ", self.dim());
  TORCH_CHECK(mat2.dim() == 2, "Expected mat2 to be of dimension 2 but got ", mat2.dim());
  TORCH_CHECK(self.size(0) > 16, "self.size(0) needs to be greater than 16, but got ", self.size(0));
  TORCH_CHECK(self.size(1) > 0 && self.size(1) % 8 == 0,
              "self.size(1) needs to be greater than 0 and a multiple of 8, but got ", self.size(1));
  TORCH_CHECK(self.size(1) == mat2.size(0), "self.size(1) needs to match mat2.size(0) but got ", self.size(1), " and ",
              mat2.size(0));
  TORCH_CHECK(mat2.size(1) > 0 && mat2.size(1) % 8 == 0,
              "mat2.size(1) needs to be greater than 0 and a multiple of 8, but got ", mat2.size(1));
  return run_hot<at::_ops::_int_mm_out>(self, mat2, out);
}

// As CUDA's: the result is sized before the checks.
at::Tensor int_mm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = at::empty({self.size(0), mat2.size(1)}, self.options().dtype(at::kInt));
  return int_mm_out(self, mat2, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_int_mm", TORCH_FN(int_mm));
  m.impl("_int_mm.out", TORCH_FN(int_mm_out));
}

}  // namespace openreg::eager
