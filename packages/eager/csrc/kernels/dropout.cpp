// native_dropout's CPU kernel draws from the CPU's default generator (the op
// takes no generator): on openreg it is built from bernoulli_, which draws
// from the device's generator like every other RNG op.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace openreg::eager {
namespace {

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0 || (train.has_value() && !*train)) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  const double keep = 1.0 - p;
  const double scale = keep == 0.0 ? 0.0 : 1.0 / keep;
  at::Tensor mask = at::empty_like(input, at::MemoryFormat::Contiguous).bernoulli_(keep);
  at::Tensor output = input.mul(mask).mul_(scale);
  return {output, mask.to(at::kBool)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_dropout", &native_dropout); }

}  // namespace openreg::eager
