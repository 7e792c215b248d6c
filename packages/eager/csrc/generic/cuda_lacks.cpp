#include "cuda_lacks.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <string_view>

namespace openreg::eager {
namespace {

using c10::DispatchKey;

// From the dispatcher of torch 2.14's CUDA build: ops with a kernel for a CPU
// key and none, composite ones included, for CUDA's. `overloads` lists them,
// space-separated, "default" naming the unnamed one; empty, every overload.
// Dense ops CUDA lacks that are not here are computed (README).
struct Row {
  std::string_view op;
  std::string_view overloads;
};
constexpr Row kDense[] = {
    {"aten::_add_relu", ""},
    {"aten::_add_relu_", ""},
    {"aten::_spdiags", ""},
    {"aten::slow_conv3d_forward", ""},
    {"aten::to_mkldnn", ""},
    {"aten::mkldnn_rnn_layer", ""},
    {"aten::mkldnn_rnn_layer_backward", ""},
    {"aten::quantized_lstm", ""},
    {"aten::quantized_gru", ""},
};
constexpr Row kSparseCsr[] = {{"aten::_sparse_mm_reduce_impl", ""}, {"aten::_sparse_mm_reduce_impl_backward", ""}};
constexpr Row kNested[] = {{"aten::sum", "dim_IntList"}, {"aten::_nested_sum_backward", ""}};
// Every op the CPU has a QuantizedCPU kernel of and CUDA no QuantizedCUDA one.
constexpr Row kQuantized[] = {
    {"_quantized::add", ""},
    {"_quantized::conv2d", ""},
    {"_quantized::conv2d_prepack", ""},
    {"_quantized::conv2d_relu", ""},
    {"_quantized::conv3d_prepack", ""},
    {"_quantized::conv_transpose1d", ""},
    {"_quantized::conv_transpose1d_prepack", ""},
    {"_quantized::conv_transpose2d", ""},
    {"_quantized::conv_transpose2d_prepack", ""},
    {"_quantized::conv_transpose3d_prepack", ""},
    {"_quantized::linear", ""},
    {"_quantized::linear_prepack", ""},
    {"aten::_adaptive_avg_pool3d", "default"},
    {"aten::_prelu_kernel", ""},
    {"aten::adaptive_avg_pool3d", "out"},
    {"aten::cat", "out"},
    {"aten::channel_shuffle", "default"},
    {"aten::dequantize", "tensors"},
    {"aten::eq", "Scalar_out Tensor_out"},
    {"aten::equal", ""},
    {"aten::ge", "Scalar_out Tensor_out"},
    {"aten::grid_sampler_2d", "default"},
    {"aten::gt", "Scalar_out Tensor_out"},
    {"aten::hardsigmoid", "out"},
    {"aten::hardtanh", ""},
    {"aten::hardtanh_", ""},
    {"aten::le", "Scalar_out Tensor_out"},
    {"aten::leaky_relu", "out"},
    {"aten::lt", "Scalar_out Tensor_out"},
    {"aten::max", "default unary_out"},
    {"aten::mean", "out"},
    {"aten::min", "default unary_out"},
    {"aten::ne", "Scalar_out Tensor_out"},
    {"aten::quantized_batch_norm", "default"},
    {"aten::quantized_max_pool1d", "default"},
    {"aten::quantized_max_pool3d", "default"},
    {"aten::reflection_pad1d", "out"},
    {"aten::reflection_pad2d", ""},
    {"aten::resize_", ""},
    {"aten::std", "correction correction_out"},
    {"quantized::add", "Scalar Scalar2 Scalar_out out"},
    {"quantized::add_out", ""},
    {"quantized::add_relu", "Scalar Scalar2 Scalar_out out"},
    {"quantized::add_relu_out", ""},
    {"quantized::add_scalar", ""},
    {"quantized::add_scalar_out", ""},
    {"quantized::add_scalar_relu", ""},
    {"quantized::add_scalar_relu_out", ""},
    {"quantized::batch_norm", ""},
    {"quantized::batch_norm1d", ""},
    {"quantized::batch_norm1d_relu", ""},
    {"quantized::batch_norm2d", ""},
    {"quantized::batch_norm2d_relu", ""},
    {"quantized::batch_norm3d", ""},
    {"quantized::batch_norm3d_relu", ""},
    {"quantized::batch_norm_relu", ""},
    {"quantized::cat", ""},
    {"quantized::cat_out", ""},
    {"quantized::cat_relu", ""},
    {"quantized::cat_relu_out", ""},
    {"quantized::celu", ""},
    {"quantized::clamp", ""},
    {"quantized::conv2d", "default"},
    {"quantized::conv2d_add", ""},
    {"quantized::conv2d_add_relu", ""},
    {"quantized::conv2d_relu", "default"},
    {"quantized::conv3d", ""},
    {"quantized::conv3d_prepack", ""},
    {"quantized::conv3d_relu", ""},
    {"quantized::conv_prepack", ""},
    {"quantized::conv_transpose1d", ""},
    {"quantized::conv_transpose1d_prepack", ""},
    {"quantized::conv_transpose2d", ""},
    {"quantized::conv_transpose2d_prepack", ""},
    {"quantized::conv_transpose3d", ""},
    {"quantized::conv_transpose3d_prepack", ""},
    {"quantized::dropout", ""},
    {"quantized::elu", ""},
    {"quantized::embedding_bag_prepack", ""},
    {"quantized::group_norm", ""},
    {"quantized::hardswish", ""},
    {"quantized::instance_norm", ""},
    {"quantized::layer_norm", ""},
    {"quantized::leaky_relu", ""},
    {"quantized::linear_leaky_relu", ""},
    {"quantized::linear_prepack_legacy", ""},
    {"quantized::linear_tanh", ""},
    {"quantized::matmul", ""},
    {"quantized::max_pool1d", ""},
    {"quantized::mul", ""},
    {"quantized::mul_out", ""},
    {"quantized::mul_relu", ""},
    {"quantized::mul_relu_out", ""},
    {"quantized::mul_scalar", ""},
    {"quantized::mul_scalar_out", ""},
    {"quantized::mul_scalar_relu", ""},
    {"quantized::mul_scalar_relu_out", ""},
    {"quantized::prelu", ""},
    {"quantized::relu6", ""},
    {"quantized::sigmoid", ""},
    {"quantized::softmax", ""},
    {"quantized::threshold", ""},
    {"sparse::qlinear", ""},
    {"sparse::qlinear_prepack", ""},
    {"sparse::qlinear_relu", ""},
};

bool names(const Row& row, const c10::OperatorName& op) {
  if (row.op != op.name) return false;
  if (row.overloads.empty()) return true;
  const std::string_view want =
      op.overload_name.empty() ? std::string_view("default") : std::string_view(op.overload_name);
  for (size_t start = 0; start < row.overloads.size();) {
    const size_t end = std::min(row.overloads.find(' ', start), row.overloads.size());
    if (row.overloads.substr(start, end - start) == want) return true;
    start = end + 1;
  }
  return false;
}

template <size_t N>
bool in(const Row (&table)[N], const c10::OperatorName& op) {
  for (const Row& row : table) {
    if (names(row, op)) return true;
  }
  return false;
}

}  // namespace

c10::DispatchKey cuda_lacks_kernel(const c10::OperatorName& op) {
  if (in(kDense, op)) return DispatchKey::PrivateUse1;
  if (in(kQuantized, op)) return DispatchKey::QuantizedPrivateUse1;
  if (in(kSparseCsr, op)) return DispatchKey::SparseCsrPrivateUse1;
  if (in(kNested, op)) return DispatchKey::NestedTensorPrivateUse1;
  return DispatchKey::Undefined;
}

void refuse_as_cuda_lacks(const c10::OperatorName& op, c10::DispatchKey key) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "Could not run '", op, "' with arguments from the '", key,
                              "' backend. CUDA has no kernel for it either; openreg refuses it as CUDA does (the CPU "
                              "computes it).");
}

}  // namespace openreg::eager
