// LU without pivoting (`linalg.lu_factor(A, pivot=False)`, `linalg.lu`,
// `torch.lu`), which CUDA computes (getrf without row exchanges) and the CPU's
// LAPACK kernel refuses. Right-looking elimination in openreg's dense ops,
// queued as CUDA's kernel is. As CUDA gives them: pivots the identity
// permutation (1-based), info getrf's (the first zero pivot, 1-based), and a
// zero pivot leaves inf or NaN (the factorization does not exist). With
// pivoting, the generic kernel runs the CPU's.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/linalg_lu_factor_ex_meta_dispatch.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "../generic/kernel.h"

namespace openreg::eager {
namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> factor(const at::Tensor& A, bool check_errors) {
  // ATen's own meta function makes the CPU's checks, with its messages, and gives the results' layout.
  const auto [lu_meta, pivots_meta, info_meta] = at::meta::linalg_lu_factor_ex(A, /*pivot=*/false);
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES(A.scalar_type(), "lu_factor_without_pivoting", [] {});
  at::Tensor lu = at::empty_strided(lu_meta.sizes(), lu_meta.strides(), A.options()).copy_(A);
  at::Tensor info = at::zeros(info_meta.sizes(), A.options().dtype(at::kInt));
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  for (int64_t j = 0; j < k; ++j) {
    const at::Tensor pivot = lu.select(-2, j).select(-1, j);
    info.masked_fill_(info.eq(0).logical_and_(pivot.eq(0)), j + 1);
    if (j + 1 == m) continue;
    at::Tensor below = lu.narrow(-2, j + 1, m - j - 1).select(-1, j);
    below.div_(pivot.unsqueeze(-1));
    if (j + 1 == n) continue;
    const at::Tensor right = lu.select(-2, j).narrow(-1, j + 1, n - j - 1);
    lu.narrow(-2, j + 1, m - j - 1).narrow(-1, j + 1, n - j - 1).sub_(below.unsqueeze(-1) * right.unsqueeze(-2));
  }
  at::Tensor pivots = at::empty(pivots_meta.sizes(), A.options().dtype(at::kInt));
  pivots.copy_(at::arange(1, k + 1, pivots.options()));
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.lu_factor_ex", A.dim() == 2);
  return {lu, pivots, info};
}

// Leaves `results` on the stack in place of the op's `n` arguments, written
// into its out= tensors (the last results.size() arguments) when it has them.
void finish(torch::jit::Stack* stack, size_t n, bool out, std::initializer_list<at::Tensor> results) {
  std::vector<at::Tensor> returned(results);
  if (out) {
    auto outs = torch::jit::last(*stack, results.size());
    for (size_t i = 0; i < returned.size(); ++i) {
      const at::Tensor& o = outs[i].toTensor();
      // As a structured kernel's out: a resized out takes the result's layout (LU's is column-major).
      if (at::native::resize_output(o, returned[i].sizes())) o.as_strided_(returned[i].sizes(), returned[i].strides());
      o.copy_(returned[i]);
      returned[i] = o;
    }
  }
  torch::jit::drop(*stack, n);
  for (auto& r : returned) torch::jit::push(*stack, std::move(r));
}

// linalg_lu_factor_ex(A, *, pivot, check_errors[, LU, pivots, info])
void lu_factor_ex(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  const auto args = torch::jit::last(*stack, n);
  if (args[1].toBool()) return generic_kernel(op, stack);
  const auto [lu, pivots, info] = factor(args[0].toTensor(), args[2].toBool());
  finish(stack, n, n == 6, {lu, pivots, info});
}

// linalg_lu(A, *, pivot[, P, L, U]): P is empty without pivoting.
void lu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  const auto args = torch::jit::last(*stack, n);
  if (args[1].toBool()) return generic_kernel(op, stack);
  const auto [lu, pivots, info] = factor(args[0].toTensor(), /*check_errors=*/false);
  const auto [P, L, U] = at::lu_unpack(lu, pivots, /*unpack_data=*/true, /*unpack_pivots=*/false);
  finish(stack, n, n == 5, {P, L, U});
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_lu_factor_ex", torch::CppFunction::makeFromBoxedFunction<&lu_factor_ex>());
  m.impl("linalg_lu_factor_ex.out", torch::CppFunction::makeFromBoxedFunction<&lu_factor_ex>());
  m.impl("linalg_lu", torch::CppFunction::makeFromBoxedFunction<&lu>());
  m.impl("linalg_lu.out", torch::CppFunction::makeFromBoxedFunction<&lu>());
}

}  // namespace openreg::eager
