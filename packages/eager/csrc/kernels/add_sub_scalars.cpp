// CUDA's add and sub compute a float16 or bfloat16 result in float from
// operands read as the result's dtype, and round once: a CPU scalar (a Python
// number, a 0-dim CPU tensor) and alpha are read in float. The CPU's kernel
// rounds them to the result's dtype first (a bfloat16 x + 1.7 adds 1.703125,
// x.add(y, alpha=0.3) multiplies by 0.30078125) and rounds alpha * y before
// adding it (60000 - 2 * 60000 overflows in float16). Inductor compiles CUDA's
// way, so openreg's compiled and eager code disagreed. openreg computes such a
// call in float32 and rounds once, as CUDA's kernel does; every other call is
// the CPU's kernel, as a hot op's.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/sub_ops.h>
#include <torch/library.h>

#include <optional>

#include "../generic/hot_ops.h"

namespace openreg::eager {
namespace {

bool cpu_scalar(const at::Tensor& t) { return t.is_cpu() && t.dim() == 0; }

bool half_precision(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

// Whether CUDA's kernel reads one argument, a CPU scalar, wider than the result's float16 or bfloat16.
bool reads_scalar_wide(const at::Tensor& self, const at::Tensor& other) {
  const bool self_is_scalar = cpu_scalar(self);
  if (self_is_scalar == cpu_scalar(other)) return false;
  // Only a half-precision device tensor gives such a result: return before type promotion on every other call.
  const at::ScalarType tensor = (self_is_scalar ? other : self).scalar_type();
  if (!half_precision(tensor)) return false;
  return (self_is_scalar ? self : other).scalar_type() != tensor && at::result_type(self, other) == tensor;
}

// The float16 or bfloat16 dtype of a call that CUDA's kernel computes from something the CPU's rounds to that dtype
// first; none for every other call.
std::optional<at::ScalarType> wide_result(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (reads_scalar_wide(self, other)) return (cpu_scalar(self) ? other : self).scalar_type();  // the result's
  // Only a half-precision operand gives such a result: return before type promotion on every other call.
  if (alpha.isBoolean() || alpha.isComplex() || alpha.equal(1)) return std::nullopt;
  if (!half_precision(self.scalar_type()) && !half_precision(other.scalar_type())) return std::nullopt;
  const at::ScalarType result = at::result_type(self, other);
  return half_precision(result) ? std::optional(result) : std::nullopt;
}

// An operand as CUDA's kernel reads it: a device tensor as the result's dtype, in float. A bool one reads as 0 or 1
// either way and stays bool, so that sub's check refuses it with the CPU's error.
at::Tensor widened(const at::Tensor& t, at::ScalarType result) {
  return cpu_scalar(t) || t.scalar_type() == at::kBool ? t : t.to(result).to(at::kFloat);
}

// The overlap checks of the CPU's kernel (TensorIterator's), which sees the operands' float copies here.
void check_overlaps(const at::Tensor& written, const at::Tensor& self, const at::Tensor& other) {
  at::assert_no_internal_overlap(written);
  for (const at::Tensor* read : {&self, &other}) {
    if (!read->is_same(written)) at::assert_no_partial_overlap(written, *read);
  }
}

template <class Op>
at::Tensor functional(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  const auto result = wide_result(self, other, alpha);
  if (!result) return run_hot<Op>(self, other, alpha);
  return run_hot<Op>(widened(self, *result), widened(other, *result), alpha).to(*result);
}

// CUDA's kernel rounds to the result's dtype before it writes `out`, of whatever dtype; the out= op writes a
// float32 result into `out` of that dtype once, with its own checks of `out`.
template <class Op, class OutOp>
at::Tensor& out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  const auto result = wide_result(self, other, alpha);
  if (!result) return run_hot<OutOp>(self, other, alpha, out);
  check_overlaps(out, self, other);
  if (out.scalar_type() == *result) {
    return run_hot<OutOp>(widened(self, *result), widened(other, *result), alpha, out);
  }
  TORCH_CHECK(at::canCast(*result, out.scalar_type()), "result type ", *result,
              " can't be cast to the desired output type ", out.scalar_type());
  const at::Tensor rounded = functional<Op>(self, other, alpha);
  at::native::resize_output(out, rounded.sizes());
  return out.copy_(rounded);
}

// Into `self` of the result's dtype only: the CPU's kernel refuses any other result with its own error.
template <class InplaceOp, class OutOp>
at::Tensor& inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  const auto result = cpu_scalar(self) ? std::nullopt : wide_result(self, other, alpha);
  if (result != self.scalar_type()) return run_hot<InplaceOp>(self, other, alpha);
  check_overlaps(self, self, other);
  return run_hot<OutOp>(widened(self, *result), widened(other, *result), alpha, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace at::_ops;
  m.impl("add.Tensor", TORCH_FN(functional<add_Tensor>));
  m.impl("add_.Tensor", TORCH_FN((inplace<add__Tensor, add_out>)));
  m.impl("add.out", TORCH_FN((out<add_Tensor, add_out>)));
  m.impl("sub.Tensor", TORCH_FN(functional<sub_Tensor>));
  m.impl("sub_.Tensor", TORCH_FN((inplace<sub__Tensor, sub_out>)));
  m.impl("sub.out", TORCH_FN((out<sub_Tensor, sub_out>)));
}

}  // namespace openreg::eager
