// CUDA solves least squares with gels alone: it is CUDA's default driver, and
// ATen refuses any other on a device that is not the CPU. The CPU's kernel,
// which sees host tensors, would default to gelsy and take gelsd and gelss,
// whose results differ from gels' (a rank and singular values where gels
// returns them empty, a minimum-norm solution of a rank-deficient system).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "../generic/kernel.h"

namespace openreg::eager {
namespace {

void lstsq(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto driver_index = op.schema().argumentIndexWithName("driver");
  TORCH_INTERNAL_ASSERT(driver_index, "linalg_lstsq.out takes a driver");
  c10::IValue& driver = torch::jit::peek(*stack, *driver_index, op.schema().arguments().size());
  if (!driver.isNone()) {
    std::string name = driver.toStringRef();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    TORCH_CHECK(name == "gels", "torch.linalg.lstsq: `driver` other than `gels` is not supported on CUDA");
  }
  driver = c10::IValue(std::string("gels"));
  generic_kernel(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_lstsq.out", torch::CppFunction::makeFromBoxedFunction<&lstsq>());
}

}  // namespace openreg::eager
