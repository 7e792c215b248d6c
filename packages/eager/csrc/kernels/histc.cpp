// CUDA's histc bins integer inputs too, which the CPU's refuses: the range is
// converted to the input's type (truncated), read from the values when
// min == max (on the host, at the call) and widened by one each way when it
// is empty; an element's bin is (x - min) * bins / (max - min) in integer
// arithmetic, max falling in the last bin, and counts are of the input's type.
// Floating inputs take the CPU's kernel through the generic one.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "../generic/kernel.h"

namespace openreg::eager {
namespace {

at::Tensor integer_histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  TORCH_CHECK(bins > 0, "torch.histc: bins must be > 0, but got ", bins);
  int64_t lo = 0, hi = 0;
  AT_DISPATCH_INTEGRAL_TYPES(self.scalar_type(), "histc", [&] {
    scalar_t low = min.to<scalar_t>(), high = max.to<scalar_t>();
    if (low == high && self.numel() > 0) {
      low = self.min().item<scalar_t>();
      high = self.max().item<scalar_t>();
    }
    if (low == high) {
      low = static_cast<scalar_t>(low - 1);
      high = static_cast<scalar_t>(high + 1);
    }
    lo = low;
    hi = high;
  });
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  const at::Tensor x = self.reshape(-1).to(at::kLong);
  const at::Tensor inside = x.ge(lo).logical_and_(x.le(hi));
  const at::Tensor bin = x.sub(lo).mul_(bins).div_(hi - lo, "trunc").clamp_(0, bins - 1);
  return at::zeros({bins}, self.options()).scatter_add_(0, bin, inside.to(self.scalar_type()));
}

void histc(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor self = (*stack)[0].toTensor();
  if (!c10::isIntegralType(self.scalar_type(), /*includeBool=*/false)) return generic_kernel(op, stack);
  at::Tensor result = integer_histc(self, (*stack)[1].toInt(), (*stack)[2].toScalar(), (*stack)[3].toScalar());
  const bool out = stack->size() == 5;
  if (out) {
    at::Tensor given = (*stack)[4].toTensor();
    at::native::resize_output(given, result.sizes());
    result = given.copy_(result);
  }
  torch::jit::drop(*stack, out ? 5 : 4);
  torch::jit::push(*stack, std::move(result));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", torch::CppFunction::makeFromBoxedFunction<&histc>());
  m.impl("histc.out", torch::CppFunction::makeFromBoxedFunction<&histc>());
}

}  // namespace openreg::eager
