// CUDA inverts from a Cholesky factor by solving against the identity (potrs),
// which does not look at the factor's diagonal: a zero on it gives inf or NaN
// (PyTorch's test_linalg.py asserts that for CUDA). The CPU's kernel (potri)
// raises LinAlgError there. openreg solves as CUDA does, with openreg's
// cholesky_solve, queued; an input the CPU's checks refuse (not a batch of
// square floating-point matrices) gets the CPU's kernel and its error.
#include <ATen/ATen.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/cholesky_inverse_ops.h>
#include <torch/library.h>

#include "../generic/hot_ops.h"

namespace openreg::eager {
namespace {

bool solvable(const at::Tensor& factor) {
  return factor.dim() >= 2 && factor.size(-1) == factor.size(-2) &&
         (at::isFloatingType(factor.scalar_type()) || at::isComplexType(factor.scalar_type()));
}

at::Tensor solved(const at::Tensor& factor, bool upper) {
  return at::cholesky_solve(at::eye(factor.size(-1), factor.options()), factor, upper);
}

at::Tensor inverse(const at::Tensor& factor, bool upper) {
  if (!solvable(factor)) return run_hot<at::_ops::cholesky_inverse>(factor, upper);
  return solved(factor, upper);
}

at::Tensor& inverse_out(const at::Tensor& factor, bool upper, at::Tensor& out) {
  if (!solvable(factor)) return run_hot<at::_ops::cholesky_inverse_out>(factor, upper, out);
  at::native::checkSameDevice("cholesky_inverse", out, factor);
  at::native::checkLinalgCompatibleDtype("cholesky_inverse", out, factor);
  const at::Tensor result = solved(factor, upper);
  // ATen's: an empty `out` of the input's dtype is laid out batched column-major, as LAPACK writes it.
  if (out.numel() == 0 && out.scalar_type() == factor.scalar_type()) {
    out.resize_(factor.mT().sizes(), at::MemoryFormat::Contiguous);
    out.transpose_(-2, -1);
  }
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cholesky_inverse", TORCH_FN(inverse));
  m.impl("cholesky_inverse.out", TORCH_FN(inverse_out));
}

}  // namespace openreg::eager
