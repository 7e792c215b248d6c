// CUDA lays nonzero_static's result out column by column, as nonzero's on
// every device, and PyTorch's meta kernel says so for every device but the
// CPU, XPU and MPS, whose kernels write it row by row. openreg copies the
// CPU kernel's result into CUDA's layout.
#include <ATen/ATen.h>
#include <ATen/ops/nonzero_static_ops.h>
#include <torch/library.h>

#include "../generic/hot_ops.h"

namespace openreg::eager {
namespace {

at::Tensor nonzero_static(const at::Tensor& self, c10::SymInt size, int64_t fill_value) {
  at::Tensor rows = run_hot<at::_ops::nonzero_static>(self, size, fill_value);
  const int64_t n = rows.size(0);
  return at::empty_strided({n, rows.size(1)}, {1, n}, rows.options()).copy_(rows);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("nonzero_static", &nonzero_static); }

}  // namespace openreg::eager
