#include "cuda_lacks.h"

#include <c10/util/Exception.h>

#include <string_view>

#include "word_list.h"

namespace openreg::eager {
namespace {

using c10::DispatchKey;

// From the dispatcher of torch 2.14's CUDA build: ops with a kernel for a CPU
// key and none, composite ones included, for CUDA's. `overloads` lists them,
// space-separated, "default" naming the unnamed one; empty, every overload.
// Left out, and computed: test ops, c10d's, and the tokens and asserts of
// functionalized graphs (`_make_dep_token`, `_functional_assert_async`), whose
// CUDA behaviour is unchecked; `histogram`, refused in cuda_refuses.cpp; the
// empty quantized factories, which raise either way.
struct Row {
  std::string_view op;
  std::string_view overloads;
};
constexpr Row kDense[] = {
    {"_quantized::_wrapped_linear_prepack", ""},
    {"_quantized::_wrapped_quantized_linear_prepacked", ""},
    {"_quantized::linear_dynamic", ""},
    {"_quantized::linear_prepack_fp16", ""},
    {"_quantized::linear_prepack_fp16_legacy", ""},
    {"_quantized::wrapped_fbgemm_linear_fp16_weight", ""},
    {"_quantized::wrapped_fbgemm_pack_gemm_matrix_fp16", ""},
    {"_quantized::wrapped_quantized_linear", ""},
    {"aten::_add_relu", "Scalar Tensor out"},
    {"aten::_add_relu_", ""},
    {"aten::_convert_weight_to_int4pack_for_cpu", ""},
    {"aten::_dyn_quant_matmul_4bit", ""},
    {"aten::_dyn_quant_pack_4bit_weight", ""},
    {"aten::_scaled_dot_product_flash_attention_for_cpu", ""},
    {"aten::_scaled_dot_product_flash_attention_for_cpu_backward", ""},
    {"aten::_spdiags", "default"},
    {"aten::_upsample_lanczos2d_aa", "out"},
    {"aten::_upsample_lanczos2d_aa_backward", "grad_input"},
    {"aten::_weight_int4pack_mm_for_cpu", ""},
    {"aten::from_file", "default"},
    {"aten::mkldnn_rnn_layer", "default"},
    {"aten::mkldnn_rnn_layer_backward", "default"},
    {"aten::narrow_copy", "out"},
    {"aten::quantize_per_tensor", "tensors"},
    {"aten::quantized_gru", ""},
    {"aten::quantized_lstm", ""},
    {"aten::slow_conv3d_forward", ""},
    {"aten::to_mkldnn", "default"},
    {"mkl::_mkl_linear", ""},
    {"mkl::_mkl_reorder_linear_weight", ""},
    {"mkldnn::_convolution_pointwise", ""},
    {"mkldnn::_convolution_pointwise_", ""},
    {"mkldnn::_convolution_transpose_pointwise", ""},
    {"mkldnn::_linear_pointwise", ""},
    {"mkldnn::_reorder_convolution_transpose_weight", ""},
    {"mkldnn::_reorder_convolution_weight", ""},
    {"mkldnn::_reorder_linear_weight", ""},
    {"mkldnn::_reorder_mkldnn_rnn_layer_weight", ""},
    {"mkldnn_prepacked::conv2d_prepack", ""},
    {"mkldnn_prepacked::conv2d_run", ""},
    {"onednn::linear_prepack_fp16", ""},
    {"onednn::qadd", ""},
    {"onednn::qadd_relu", ""},
    {"onednn::qbatch_norm2d", ""},
    {"onednn::qconv2d_pointwise", "binary binary_tensor"},
    {"onednn::qconv_pointwise", ""},
    {"onednn::qconv_prepack", ""},
    {"onednn::qlinear_pointwise", ""},
    {"onednn::qlinear_prepack", ""},
    {"onednn::qmul", ""},
    {"quantized::conv1d_dynamic", ""},
    {"quantized::conv2d_dynamic", ""},
    {"quantized::conv3d_dynamic", ""},
    {"quantized::conv_transpose1d_dynamic", ""},
    {"quantized::conv_transpose2d_dynamic", ""},
    {"quantized::conv_transpose3d_dynamic", ""},
    {"quantized::embedding_4bit", ""},
    {"quantized::embedding_bag_2bit_prepack", ""},
    {"quantized::embedding_bag_2bit_prepack_with_rowwise_min_max", ""},
    {"quantized::embedding_bag_2bit_rowwise_offsets", ""},
    {"quantized::embedding_bag_2bit_unpack", ""},
    {"quantized::embedding_bag_4bit", ""},
    {"quantized::embedding_bag_4bit_prepack", ""},
    {"quantized::embedding_bag_4bit_prepack_with_rowwise_min_max", ""},
    {"quantized::embedding_bag_byte", ""},
    {"quantized::embedding_bag_byte_prepack", ""},
    {"quantized::embedding_bag_byte_prepack_with_rowwise_min_max", ""},
    {"quantized::embedding_byte", ""},
    {"quantized::int4mm_packed_weight_cpu", ""},
    {"quantized::linear_dynamic", ""},
    {"quantized::linear_dynamic_fp16", ""},
    {"quantized::linear_dynamic_fp16_unpacked_weight", ""},
    {"quantized::linear_prepack_fp16", ""},
    {"quantized::linear_prepack_fp16_legacy", ""},
    {"quantized::linear_relu_dynamic", ""},
    {"quantized::linear_relu_dynamic_fp16", ""},
    {"quantized::linear_unpack", "legacy"},
    {"quantized::linear_unpack_fp16", "legacy"},
    {"quantized::linear_with_input_q_dq_qweight_dq_output_fp32", ""},
    {"quantized::linear_with_input_q_dq_qweight_dq_relu_output_fp32", ""},
    {"quantized::make_quantized_cell_params", ""},
    {"quantized::make_quantized_cell_params_dynamic", ""},
    {"quantized::max_pool2d", ""},
    {"quantized::quantized_gru_cell_dynamic", ""},
    {"quantized::quantized_lstm_cell_dynamic", ""},
    {"quantized::quantized_rnn_relu_cell_dynamic", ""},
    {"quantized::quantized_rnn_tanh_cell_dynamic", ""},
    {"sparse::qlinear_dynamic", ""},
    {"sparse::qlinear_relu_dynamic", ""},
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
  return lists(row.overloads, want);
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
