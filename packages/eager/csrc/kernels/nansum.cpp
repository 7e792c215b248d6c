// CUDA's nansum sums complex inputs, leaving out each element with a NaN part
// (its NanSumOps), and so does nanmean, which is built on it; the CPU's front
// end refuses them. For those openreg sums the input with such elements
// zeroed; every other dtype takes the CPU's kernel through the generic one.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "../generic/kernel.h"

namespace openreg::eager {
namespace {

at::Tensor nan_zeroed(const at::Tensor& self) { return self.masked_fill(self.isnan(), 0); }

void nansum(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor self = (*stack)[0].toTensor();
  if (!self.is_complex()) return generic_kernel(op, stack);
  const auto dims = (*stack)[1].toOptional<std::vector<int64_t>>();
  const at::OptionalIntArrayRef dim = dims ? at::OptionalIntArrayRef(*dims) : std::nullopt;
  const bool keepdim = (*stack)[2].toBool();
  const auto dtype = (*stack)[3].toOptional<at::ScalarType>();
  const bool out = stack->size() == 5;
  at::Tensor result = out ? at::sum_out((*stack)[4].toTensor(), nan_zeroed(self), dim, keepdim, dtype)
                          : at::sum(nan_zeroed(self), dim, keepdim, dtype);
  torch::jit::drop(*stack, out ? 5 : 4);
  torch::jit::push(*stack, std::move(result));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nansum", torch::CppFunction::makeFromBoxedFunction<&nansum>());
  m.impl("nansum.out", torch::CppFunction::makeFromBoxedFunction<&nansum>());
}

}  // namespace openreg::eager
