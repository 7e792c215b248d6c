// A nested tensor [B, *, D] (or [B, *]) added to or multiplied by a dense
// [B, 1, D] (or [B, 1]) one: CUDA computes it, row by row, where ATen's kernel
// for any other device refuses the dense operand (its branch asks is_cuda()).
// So does openreg, with its dense ops on each component. Every other call runs
// ATen's nested kernel, which CUDA runs too, over the device buffers.
#include <ATen/NestedTensorImpl.h>
#include <ATen/ops/_nested_tensor_from_tensor_list.h>
#include <ATen/ops/add.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/mul_native.h>
#include <torch/library.h>

#include <optional>
#include <vector>

#include "../layouts/registration.h"

namespace openreg::eager {
namespace {

// `other` as [B, 1, D] where CUDA's branch takes the pair, else nothing.
std::optional<at::Tensor> rows_of(const at::Tensor& self, const at::Tensor& other) {
  if (!self.is_nested() || other.is_nested() || other.device() != self.device() || other.dim() != self.dim() ||
      other.size(0) != self.size(0) || other.size(1) != 1) {
    return std::nullopt;
  }
  if (self.dim() == 2) return other.unsqueeze(-1);
  if (self.dim() == 3) {
    const auto d = at::native::get_nested_tensor_impl(self)->opt_size(2);
    if (d && *d == other.size(2)) return other;
  }
  return std::nullopt;
}

template <typename F>
at::Tensor per_row(const at::Tensor& self, const at::Tensor& rows, F f) {
  std::vector<at::Tensor> parts;
  const std::vector<at::Tensor> components = self.unbind();
  for (size_t i = 0; i < components.size(); ++i) {
    const at::Tensor c = self.dim() == 2 ? components[i].unsqueeze(-1) : components[i];
    at::Tensor r = f(c, rows[static_cast<int64_t>(i)]);
    parts.push_back(self.dim() == 2 ? r.squeeze(-1) : r);
  }
  return at::_nested_tensor_from_tensor_list(parts);
}

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  if (const auto rows = rows_of(self, other)) {
    return per_row(self, *rows, [&](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b, alpha); });
  }
  return at::native::NestedTensor_add_Tensor(self, other, alpha);
}

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  if (const auto rows = rows_of(self, other)) {
    return per_row(self, *rows, [](const at::Tensor& a, const at::Tensor& b) { return at::mul(a, b); });
  }
  return at::native::NestedTensor_mul_Tensor(self, other);
}

}  // namespace

void register_nested_dense(torch::Library& nested) {
  nested.impl("add.Tensor", &add);
  nested.impl("mul.Tensor", &mul);
}

}  // namespace openreg::eager
