// Nested tensors' random ops draw from openreg's generator, as CUDA's draw
// from CUDA's. The layout kernel hands the CPU's kernels openreg's generator
// where an op takes one; native_dropout takes none, and the CPU's kernel
// would draw from the CPU's: ATen's nested kernel, which CUDA runs too, calls
// the dense native_dropout on the buffer, openreg's own.
#include <ATen/ops/native_dropout_native.h>
#include <torch/library.h>

#include "../layouts/registration.h"

namespace openreg::eager {

void register_nested_random(torch::Library& nested) {
  nested.impl("native_dropout", &at::native::native_dropout_nested);
}

}  // namespace openreg::eager
