#include "cuda_dtypes.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace openreg::eager {
namespace {

using T = at::ScalarType;

struct Row {
  std::string_view op;  // every overload, and the in-place op
  T narrow;             // complex32 also covers the float16 tensors promoted to it
  T wide;
  bool sparse_only = false;  // for sparse arguments: CUDA's dense kernel refuses it as the CPU's does
};

// CUDA's kernels for these ops dispatch on the narrow dtype (OpInfo's
// dtypesIfCUDA for them, against its CPU dtypes); the CPU's do not.
constexpr Row kTable[] = {
    {"aten::acos", T::ComplexHalf, T::ComplexFloat},
    {"aten::acosh", T::ComplexHalf, T::ComplexFloat},
    {"aten::asin", T::ComplexHalf, T::ComplexFloat},
    {"aten::asinh", T::ComplexHalf, T::ComplexFloat},
    {"aten::atan", T::ComplexHalf, T::ComplexFloat},
    {"aten::atanh", T::ComplexHalf, T::ComplexFloat},
    {"aten::cos", T::ComplexHalf, T::ComplexFloat},
    {"aten::cosh", T::ComplexHalf, T::ComplexFloat},
    {"aten::sin", T::ComplexHalf, T::ComplexFloat},
    {"aten::sinh", T::ComplexHalf, T::ComplexFloat},
    {"aten::tan", T::ComplexHalf, T::ComplexFloat},
    {"aten::tanh", T::ComplexHalf, T::ComplexFloat},
    {"aten::exp", T::ComplexHalf, T::ComplexFloat},
    {"aten::log", T::ComplexHalf, T::ComplexFloat},
    {"aten::sqrt", T::ComplexHalf, T::ComplexFloat},
    {"aten::rsqrt", T::ComplexHalf, T::ComplexFloat},
    {"aten::sigmoid", T::ComplexHalf, T::ComplexFloat},
    {"aten::sigmoid_backward", T::ComplexHalf, T::ComplexFloat},  // their gradients, as CUDA's kernels do
    {"aten::tanh_backward", T::ComplexHalf, T::ComplexFloat},
    {"aten::angle", T::ComplexHalf, T::ComplexFloat},
    {"aten::div", T::ComplexHalf, T::ComplexFloat},
    {"aten::pow", T::ComplexHalf, T::ComplexFloat},
    {"aten::logaddexp", T::ComplexHalf, T::ComplexFloat},
    {"aten::lerp", T::ComplexHalf, T::ComplexFloat},
    {"aten::sum", T::ComplexHalf, T::ComplexFloat},
    {"aten::prod", T::ComplexHalf, T::ComplexFloat},
    {"aten::trace", T::ComplexHalf, T::ComplexFloat},
    {"aten::trace", T::Bool, T::Byte},
    {"aten::abs", T::Bool, T::Byte},
    {"aten::_fft_c2c", T::ComplexHalf, T::ComplexFloat},
    {"aten::_fft_c2r", T::ComplexHalf, T::ComplexFloat},
    {"aten::_fft_r2c", T::ComplexHalf, T::ComplexFloat},  // a float16 signal, its transform complex32
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 14
    {"aten::_fft_r2c", T::BFloat16, T::Float},  // stft's: from torch 2.14 CUDA's FFTs take bfloat16
#endif
    {"aten::avg_pool3d", T::Half, T::Float},
    {"aten::avg_pool3d", T::BFloat16, T::Float},
    {"aten::avg_pool3d_backward", T::Half, T::Float},
    {"aten::avg_pool3d_backward", T::BFloat16, T::Float},
    {"aten::_upsample_bilinear2d_aa", T::Half, T::Float},
    {"aten::_upsample_bilinear2d_aa", T::BFloat16, T::Float},
    {"aten::_upsample_bilinear2d_aa_backward", T::Half, T::Float},
    {"aten::_upsample_bilinear2d_aa_backward", T::BFloat16, T::Float},
    {"aten::multi_margin_loss", T::Half, T::Float},
    {"aten::multi_margin_loss", T::BFloat16, T::Float},
    {"aten::multi_margin_loss_backward", T::Half, T::Float},
    {"aten::multi_margin_loss_backward", T::BFloat16, T::Float},
    {"aten::multilabel_margin_loss_forward", T::Half, T::Float},
    {"aten::multilabel_margin_loss_forward", T::BFloat16, T::Float},
    {"aten::multilabel_margin_loss_backward", T::Half, T::Float},
    {"aten::multilabel_margin_loss_backward", T::BFloat16, T::Float},
    {"aten::rrelu_with_noise", T::Half, T::Float},
    // cuSPARSE computes products of a CSR or CSC matrix in them (in float: SpMM, SpMV, SDDMM), MKL in neither
    {"aten::mm", T::Half, T::Float, true},
    {"aten::mm", T::BFloat16, T::Float, true},
    {"aten::addmm", T::Half, T::Float, true},
    {"aten::addmm", T::BFloat16, T::Float, true},
    {"aten::mv", T::Half, T::Float, true},
    {"aten::mv", T::BFloat16, T::Float, true},
    {"aten::addmv", T::Half, T::Float, true},
    {"aten::addmv", T::BFloat16, T::Float, true},
    {"aten::sparse_sampled_addmm", T::Half, T::Float, true},
    {"aten::sparse_sampled_addmm", T::BFloat16, T::Float, true},
    // QAT's learnable fake quantization (test_workflow_ops.py's CUDA cases; its fused observer: kernels/)
    {"aten::_fake_quantize_learnable_per_channel_affine", T::BFloat16, T::Float},
    {"aten::_fake_quantize_learnable_per_channel_affine_backward", T::BFloat16, T::Float},
    {"aten::mul", T::Bool, T::Byte, true},  // CUDA's sparse intersection kernel takes it, the CPU's loops not
};

// The narrow dtype and its real counterpart (float16 for complex32), each with its wide one.
std::vector<std::pair<T, T>> conversions(const Row& row) {
  std::vector<std::pair<T, T>> pairs{{row.narrow, row.wide}};
  if (at::isComplexType(row.narrow))
    pairs.emplace_back(c10::toRealValueType(row.narrow), c10::toRealValueType(row.wide));
  return pairs;
}

std::optional<T> wider(const std::vector<std::pair<T, T>>& pairs, T dtype) {
  for (const auto& [narrow, wide] : pairs) {
    if (dtype == narrow) return wide;
  }
  return std::nullopt;
}

bool is_tensor(const c10::IValue& v) { return v.isTensor() && v.toTensor().defined(); }

// COO, CSR or CSC: block layouts keep the CPU's errors (README).
bool is_sparse(const c10::IValue& v) {
  if (!is_tensor(v)) return false;
  const c10::Layout layout = v.toTensor().layout();
  return layout == c10::kSparse || layout == c10::kSparseCsr || layout == c10::kSparseCsc;
}

bool has_dtype(const torch::jit::Stack& stack, T dtype) {
  return std::any_of(stack.begin(), stack.end(),
                     [dtype](const c10::IValue& v) { return is_tensor(v) && v.toTensor().scalar_type() == dtype; });
}

// Whether some tensor has a narrow dtype and another its wide one (abs of a uint8 tensor into a bool out=): CUDA's
// kernel refuses that mix as the CPU's does, where widening would make the dtypes agree.
bool mixes_narrow_and_wide(const std::vector<std::pair<T, T>>& pairs, const torch::jit::Stack& stack) {
  return std::any_of(pairs.begin(), pairs.end(),
                     [&stack](const auto& p) { return has_dtype(stack, p.first) && has_dtype(stack, p.second); });
}

// The row whose dtypes an argument has (a float16 tensor counts for complex32: a complex number promotes it).
const Row* row_for(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  std::string_view name = op.schema().name();
  if (name.back() == '_') name.remove_suffix(1);  // the in-place variant
  for (const Row& row : kTable) {
    if (name != row.op) continue;
    if (row.sparse_only && std::none_of(stack.begin(), stack.end(), is_sparse)) continue;
    const auto pairs = conversions(row);
    if (mixes_narrow_and_wide(pairs, stack)) continue;
    for (const auto& v : stack) {
      if (is_tensor(v) && wider(pairs, v.toTensor().scalar_type())) return &row;
    }
  }
  return nullptr;
}

// The CPU kernel for the arguments' layout: a sparse one's where there is one (a dense matrix times a CSR one).
c10::DispatchKeySet cpu_kernel_for(const torch::jit::Stack& args) {
  for (const auto& v : args) {
    if (!is_sparse(v)) continue;
    return c10::DispatchKeySet(v.toTensor().is_sparse() ? c10::DispatchKey::SparseCPU : c10::DispatchKey::SparseCsrCPU);
  }
  return c10::DispatchKeySet(c10::DispatchKey::CPU);
}

void call_wider(const c10::OperatorHandle& op, torch::jit::Stack* stack, const Row& row) {
  const auto pairs = conversions(row);
  const auto& schema = op.schema();
  torch::jit::Stack args = *stack;
  // Asked for another dtype, the op returns it: its results are not narrowed.
  bool dtype_given = false;
  if (const auto dtype = schema.argumentIndexWithName("dtype"); dtype && !args[*dtype].isNone()) {
    const auto wide = wider(pairs, args[*dtype].toScalarType());
    dtype_given = !wide;
    if (wide) args[*dtype] = static_cast<int64_t>(*wide);
  }
  std::vector<std::pair<at::Tensor, at::Tensor>> widened;  // (given, wide)
  for (auto& v : args) {
    const auto wide = is_tensor(v) ? wider(pairs, v.toTensor().scalar_type()) : std::nullopt;
    if (!wide) continue;
    widened.emplace_back(v.toTensor(), v.toTensor().to(*wide));
    v = widened.back().second;
  }
  op.redispatchBoxed(cpu_kernel_for(args), &args);
  // What the op wrote into a widened argument (in place, out=) goes back into it.
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto& alias = schema.arguments()[i].alias_info();
    if (!alias || !alias->isWrite() || !is_tensor((*stack)[i])) continue;
    for (auto& [given, wide] : widened) {
      if (!(*stack)[i].toTensor().is_same(given)) continue;
      if (given.sizes() != wide.sizes()) given.resize_(wide.sizes());
      given.copy_(wide);
    }
  }
  for (auto& v : args) {
    if (!is_tensor(v)) continue;
    const at::Tensor& t = v.toTensor();
    const auto was = std::find_if(widened.begin(), widened.end(), [&](const auto& w) { return t.is_same(w.second); });
    if (was != widened.end()) {
      v = was->first;
      continue;
    }
    if (dtype_given) continue;
    for (const auto& [narrow, wide] : pairs) {
      if (t.scalar_type() == wide) {
        v = t.to(narrow);
        break;
      }
    }
  }
  *stack = std::move(args);
}

}  // namespace

bool call_in_cuda_dtype(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const Row* row = row_for(op, *stack);
  if (row == nullptr) return false;
  try {
    call_wider(op, stack, *row);
  } catch (const c10::Error&) {
    return false;
  }
  return true;
}

}  // namespace openreg::eager
