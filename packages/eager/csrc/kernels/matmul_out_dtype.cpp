// CUDA multiplies float16 and bfloat16 matrices into a float32 result (mm,
// bmm, addmm and baddbmm with `out_dtype`), accumulating in float32 as all its
// matmuls do; the CPU has no kernel for these overloads. openreg computes them
// with openreg's matmuls from the operands read in the result's dtype, after
// CUDA's checks.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace openreg::eager {
namespace {

using at::Scalar;
using at::ScalarType;
using at::Tensor;

void check_out_dtype(ScalarType input, ScalarType out_dtype) {
  TORCH_CHECK(out_dtype == input || (out_dtype == at::kFloat && (input == at::kHalf || input == at::kBFloat16)),
              "out_dtype must be the same as input dtype or fp32 for fp16/bf16 inputs");
}

void check_out(const Tensor& out, ScalarType out_dtype) {
  TORCH_CHECK(out_dtype == out.scalar_type(), "out_dtype must be the same as the dtype of the provided out tensor");
}

void check_matrices(const Tensor& mat1, const char* name, const Tensor& mat2) {
  TORCH_CHECK(mat1.dim() == 2, name, " must be a matrix, got ", mat1.dim(), "-D tensor");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix, got ", mat2.dim(), "-D tensor");
  TORCH_CHECK(mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", mat1.size(0), "x",
              mat1.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
}

void check_batches(const Tensor& batch1, const Tensor& batch2, ScalarType out_dtype, const Tensor* self = nullptr) {
  TORCH_CHECK(batch1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(batch2.dim() == 3, "batch2 must be a 3D tensor");
  const int64_t batches = batch1.size(0), contraction = batch1.size(2);
  TORCH_CHECK(batch2.size(0) == batches && batch2.size(1) == contraction,
              "Expected size for first two dimensions of batch2 tensor to be: [", batches, ", ", contraction,
              "] but got: [", batch2.size(0), ", ", batch2.size(1), "].");
  TORCH_CHECK(batch1.scalar_type() == batch2.scalar_type(), "batch1 and batch2 must have the same dtype");
  check_out_dtype(batch1.scalar_type(), out_dtype);
  if (self != nullptr) {
    TORCH_CHECK(self->dim() == 3, "self must be a 3D tensor");
    TORCH_CHECK(self->sizes() == at::IntArrayRef({batches, batch1.size(1), batch2.size(2)}),
                "self must have the same shape as the output");
  }
}

Tensor& mm_out(const Tensor& self, const Tensor& mat2, ScalarType out_dtype, Tensor& out) {
  check_matrices(self, "self", mat2);
  check_out(out, out_dtype);
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "input dtypes must be the same");
  check_out_dtype(self.scalar_type(), out_dtype);
  return at::mm_out(out, self.to(out_dtype), mat2.to(out_dtype));
}

Tensor mm(const Tensor& self, const Tensor& mat2, ScalarType out_dtype) {
  Tensor out = at::empty({self.size(0), mat2.size(1)}, self.options().dtype(out_dtype));
  return mm_out(self, mat2, out_dtype, out);
}

Tensor& addmm_out(const Tensor& self, const Tensor& mat1, const Tensor& mat2, ScalarType out_dtype, const Scalar& beta,
                  const Scalar& alpha, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "self and mat2 must have the same dtype, but got ",
              self.scalar_type(), " and ", mat2.scalar_type());
  TORCH_CHECK(mat1.scalar_type() == mat2.scalar_type(), "mat1 and mat2 must have the same dtype, but got ",
              mat1.scalar_type(), " and ", mat2.scalar_type());
  check_matrices(mat1, "mat1", mat2);
  check_out(out, out_dtype);
  check_out_dtype(self.scalar_type(), out_dtype);
  return at::addmm_out(out, self.to(out_dtype), mat1.to(out_dtype), mat2.to(out_dtype), beta, alpha);
}

Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, ScalarType out_dtype, const Scalar& beta,
             const Scalar& alpha) {
  Tensor out = at::empty(self.sizes(), self.options().dtype(out_dtype));
  return addmm_out(self, mat1, mat2, out_dtype, beta, alpha, out);
}

Tensor& bmm_out(const Tensor& batch1, const Tensor& batch2, ScalarType out_dtype, Tensor& out) {
  check_batches(batch1, batch2, out_dtype);
  check_out(out, out_dtype);
  return at::bmm_out(out, batch1.to(out_dtype), batch2.to(out_dtype));
}

Tensor bmm(const Tensor& batch1, const Tensor& batch2, ScalarType out_dtype) {
  Tensor out = at::empty({batch1.size(0), batch1.size(1), batch2.size(2)}, batch1.options().dtype(out_dtype));
  return bmm_out(batch1, batch2, out_dtype, out);
}

Tensor& baddbmm_out(const Tensor& self, const Tensor& batch1, const Tensor& batch2, ScalarType out_dtype,
                    const Scalar& beta, const Scalar& alpha, Tensor& out) {
  check_batches(batch1, batch2, out_dtype, &self);
  check_out(out, out_dtype);
  return at::baddbmm_out(out, self.to(out_dtype), batch1.to(out_dtype), batch2.to(out_dtype), beta, alpha);
}

Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, ScalarType out_dtype, const Scalar& beta,
               const Scalar& alpha) {
  Tensor out = self.to(out_dtype, /*non_blocking=*/false, /*copy=*/true);
  return baddbmm_out(self, batch1, batch2, out_dtype, beta, alpha, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm.dtype", TORCH_FN(mm));
  m.impl("mm.dtype_out", TORCH_FN(mm_out));
  m.impl("addmm.dtype", TORCH_FN(addmm));
  m.impl("addmm.dtype_out", TORCH_FN(addmm_out));
  m.impl("bmm.dtype", TORCH_FN(bmm));
  m.impl("bmm.dtype_out", TORCH_FN(bmm_out));
  m.impl("baddbmm.dtype", TORCH_FN(baddbmm));
  m.impl("baddbmm.dtype_out", TORCH_FN(baddbmm_out));
}

}  // namespace openreg::eager
