// CUDA's add and sub read a CPU scalar (a Python number, a 0-dim CPU tensor)
// at the precision they compute in, float for float16 and bfloat16 tensors;
// the CPU's kernel first rounds it to the tensor's dtype (a bfloat16 x + 1.7
// adds 1.703125). Inductor compiles each device's way, so openreg's compiled
// code (CUDA's way) and eager code (the CPU's kernel) disagreed. openreg
// computes such a call in float32 and rounds once, as CUDA's kernel does;
// every other call is the CPU's kernel, as a hot op's.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/sub_ops.h>
#include <torch/library.h>

#include "../generic/hot_ops.h"

namespace openreg::eager {
namespace {

bool cpu_scalar(const at::Tensor& t) { return t.is_cpu() && t.dim() == 0; }

// Whether CUDA's kernel reads one argument, a CPU scalar, wider than the result's float16 or bfloat16.
bool reads_scalar_wide(const at::Tensor& self, const at::Tensor& other) {
  const bool self_is_scalar = cpu_scalar(self);
  if (self_is_scalar == cpu_scalar(other)) return false;
  // Only a half-precision device tensor gives such a result: return before type promotion on every other call.
  const at::ScalarType tensor = (self_is_scalar ? other : self).scalar_type();
  if (tensor != at::kHalf && tensor != at::kBFloat16) return false;
  return (self_is_scalar ? self : other).scalar_type() != tensor && at::result_type(self, other) == tensor;
}

at::Tensor widened(const at::Tensor& t) { return cpu_scalar(t) ? t : t.to(at::kFloat); }

template <class Op>
at::Tensor functional(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (!reads_scalar_wide(self, other)) return run_hot<Op>(self, other, alpha);
  return run_hot<Op>(widened(self), widened(other), alpha).to(at::result_type(self, other));
}

// CUDA's kernel rounds to the result's dtype before it writes `out`, of whatever dtype; the out= op writes a
// float32 result into `out` of that dtype once, with its own checks of `out`.
template <class Op, class OutOp>
at::Tensor& out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  if (!reads_scalar_wide(self, other)) return run_hot<OutOp>(self, other, alpha, out);
  const at::ScalarType result = at::result_type(self, other);
  if (out.scalar_type() == result) return run_hot<OutOp>(widened(self), widened(other), alpha, out);
  TORCH_CHECK(at::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  const at::Tensor rounded = functional<Op>(self, other, alpha);
  at::native::resize_output(out, rounded.sizes());
  return out.copy_(rounded);
}

template <class InplaceOp, class OutOp>
at::Tensor& inplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (cpu_scalar(self) || !reads_scalar_wide(self, other)) return run_hot<InplaceOp>(self, other, alpha);
  return run_hot<OutOp>(widened(self), other, alpha, self);
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
