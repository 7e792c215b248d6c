#include "op_policy.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

namespace openreg::eager {
namespace {

using P = Policy;

constexpr std::string_view kSlowComposite =
    "its composite kernel decomposes it into slower or less exact steps than the CPU kernel";
constexpr std::string_view kLoopReason =
    "issued before each read of a Python loop or condition over device values: a typed kernel skips boxing";
constexpr std::string_view kCallsStub =
    "its composite kernel calls a DispatchStub itself, which has no kernel for openreg";
constexpr std::string_view kStubOfCpuAndCuda =
    "its composite kernel calls the exact kernel on CPU and CUDA only, elsewhere multiplying by 2**other in "
    "self's dtype (which overflows float16)";
constexpr std::string_view kLuWithoutPivoting =
    "CUDA factors without pivoting, which the CPU refuses (kernels/lu_without_pivoting.cpp)";
constexpr std::string_view kLapackStatus =
    "its CPU kernel raises when LAPACK's status says the values allow no result; CUDA's reads that status at the call";
constexpr std::string_view kEmbeddingBagResults =
    "the CPU kernel sizes offset2bag, bag_size and max_indices otherwise than the meta kernel and CUDA; openreg's "
    "own kernel resizes them as CUDA does (kernels/embedding_bag.cpp)";
constexpr std::string_view kEvalBatchNormStats =
    "in eval mode the CPU kernel returns save_mean/save_invstd empty where the meta kernel and CUDA size them by "
    "channel; openreg's own kernel fills them as CUDA does (kernels/normalization.cpp)";
constexpr std::string_view kCudaStats =
    "it saves the statistics CUDA saves, which the meta kernel assumes (kernels/normalization.cpp)";
constexpr std::string_view kForeachHalfScalars =
    "CUDA reads alpha and scalars in float for float16/bfloat16 lists, as its add and sub do "
    "(kernels/foreach_add_sub.cpp)";
constexpr std::string_view kIntegerHistc =
    "CUDA bins integer inputs, which the CPU's kernel refuses (kernels/histc.cpp)";
constexpr std::string_view kHalfToFloat =
    "CUDA computes half_to_float (a float16 input, a float32 result), which the CPU's kernel refuses; a typed kernel "
    "serves the rest as a hot op's (kernels/softmax.cpp)";
constexpr std::string_view kFusedOptimizerArgs =
    "CUDA's fused optimizer takes a CPU learning-rate tensor of any shape and reads it on the host (item()); it "
    "reads grad_scale and found_inf on the device";
constexpr std::string_view kIndexFillIndex =
    "CUDA's kernel (the CPU's) views the index with the input's rank for its TensorIterator, which then refuses a "
    "CPU index as a second device";
constexpr std::string_view kWideScalars =
    "CUDA's kernel reads a CPU scalar in float for float16 and bfloat16 tensors, where the CPU's first rounds it "
    "to the tensor's dtype (kernels/add_sub_scalars.cpp); it is hot otherwise";
constexpr std::string_view kContiguousUnpool =
    "CUDA's kernel writes a contiguous result, as the decomposition says, and refuses a non-contiguous out=; the "
    "CPU's keeps a channels-last input's layout (kernels/max_unpool.cpp)";
constexpr std::string_view kFloatMatmul =
    "CUDA multiplies float16 and bfloat16 matrices into a float32 result, which the CPU has no kernel for "
    "(kernels/matmul_out_dtype.cpp)";
constexpr std::string_view kInt8Shapes =
    "CUDA's int8 matmul refuses shapes it cannot tile, which the CPU's takes (kernels/int_mm.cpp)";
constexpr std::string_view kSolvedInverse =
    "CUDA solves against the identity, giving inf or NaN for a zero on the factor's diagonal where the CPU's "
    "kernel raises (kernels/cholesky_inverse.cpp)";
constexpr std::string_view kHotReason = "issued by every training step: a typed kernel skips boxing its arguments";

// Constant-initialised: other files' static initialisers (the hot ops') read it.
constexpr OpPolicy kTable[] = {
    {"aten::_native_multi_head_attention.*", P::kHostResults,
     "its meta kernel returns an empty attention-weights tensor where the CPU kernel returns none"},
    {"aten::_embedding_bag.*", P::kHostResults, kEmbeddingBagResults},
    {"aten::_embedding_bag_forward_only.*", P::kHostResults, kEmbeddingBagResults},
    {"aten::native_batch_norm.*", P::kHostUnlessTraining, kEvalBatchNormStats},
    {"aten::_native_batch_norm_legit.*", P::kHostUnlessTraining, kEvalBatchNormStats},
#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 14  // torch 2.14 removed torch.cholesky's op
    {"aten::cholesky", P::kChecksValues, kLapackStatus},
    {"aten::cholesky.out", P::kChecksValues, kLapackStatus},
#endif
    {"aten::_linalg_eigh", P::kChecksValues, kLapackStatus},
    {"aten::_linalg_eigh.eigenvalues", P::kChecksValues, kLapackStatus},
    {"aten::_linalg_svd", P::kChecksValues, kLapackStatus},
    {"aten::_linalg_svd.U", P::kChecksValues, kLapackStatus},
    {"aten::linalg_pinv.atol_rtol_tensor", P::kChecksValues, kLapackStatus},
    {"aten::linalg_pinv.atol_rtol_tensor_out", P::kChecksValues, kLapackStatus},
    {"aten::index.*", P::kCpuIndices, "CUDA takes CPU index tensors"},
    {"aten::index_put.*", P::kCpuIndices, "CUDA takes CPU index tensors"},
    {"aten::index_put_.*", P::kCpuIndices, "CUDA takes CPU index tensors"},
    {"aten::_index_put_impl_.*", P::kCpuIndices, "CUDA takes CPU index tensors"},
    {"aten::_fused_adam_.*", P::kFusedOptimizer, kFusedOptimizerArgs},
    {"aten::_fused_adam.*", P::kFusedOptimizer, kFusedOptimizerArgs},
    {"aten::_fused_adamw_.*", P::kFusedOptimizer, kFusedOptimizerArgs},
    {"aten::_fused_adamw.*", P::kFusedOptimizer, kFusedOptimizerArgs},
    {"aten::_fused_sgd_.*", P::kFusedOptimizer, kFusedOptimizerArgs},
    {"aten::_fused_sgd.*", P::kFusedOptimizer, kFusedOptimizerArgs},
    {"aten::_fused_adagrad_.*", P::kFusedOptimizer, kFusedOptimizerArgs},
    {"aten::_fused_adagrad.*", P::kFusedOptimizer, kFusedOptimizerArgs},
    {"aten::index_fill.*", P::kNoCpuScalar, kIndexFillIndex},
    {"aten::index_fill_.*", P::kNoCpuScalar, kIndexFillIndex},
    {"aten::linalg_pinv.atol_rtol_tensor", P::kNoCpuScalar,
     "its composite kernel, CUDA's, unsqueezes atol and rtol before it combines them with the singular values"},
    {"aten::histc.*", P::kRangeFromValues,
     "with min == max CUDA reads the range from the values on the host, raising a non-finite one at the call"},
    {"aten::convolution_overrideable", P::kOverrideable, "PyTorch routes convolutions of unknown devices here"},
    {"aten::convolution_backward_overrideable", P::kOverrideable,
     "PyTorch routes convolutions of unknown devices here"},
    {"aten::convolution_backward", P::kBypassComposite,
     "its composite kernel sends an unknown device's call to convolution_backward_overrideable, refusing the unbatched "
     "inputs that the CPU's and CUDA's accept from torch 2.14 on"},
    {"aten::native_group_norm", P::kBypassComposite, kSlowComposite},
    {"aten::addr", P::kBypassComposite, kSlowComposite},
    {"aten::addr.out", P::kBypassComposite, kSlowComposite},
    {"aten::_stack", P::kBypassComposite, kSlowComposite},
    {"aten::_stack.out", P::kBypassComposite, kSlowComposite},
    {"aten::any.dims_out", P::kBypassComposite, kSlowComposite},
    {"aten::all.dims_out", P::kBypassComposite, kSlowComposite},
    {"aten::linalg__powsum", P::kBypassComposite, kSlowComposite},
    {"aten::ldexp.Tensor", P::kBypassComposite, kStubOfCpuAndCuda},
    {"aten::ldexp.out", P::kBypassComposite, kStubOfCpuAndCuda},
    {"aten::ldexp_", P::kBypassComposite, kStubOfCpuAndCuda},
    {"aten::mode.values", P::kBypassComposite, "its composite kernel accepts only CPU, CUDA and XPU tensors"},
    {"aten::conj_physical_", P::kBypassComposite, kCallsStub},
    {"aten::kaiser_window", P::kBypassComposite, kCallsStub},
    {"aten::kaiser_window.out", P::kBypassComposite, kCallsStub},
    {"aten::kaiser_window.periodic", P::kBypassComposite, kCallsStub},
    {"aten::kaiser_window.periodic_out", P::kBypassComposite, kCallsStub},
    {"aten::kaiser_window.beta", P::kBypassComposite, kCallsStub},
    {"aten::kaiser_window.beta_out", P::kBypassComposite, kCallsStub},
    {"aten::mish_backward", P::kBypassComposite,
     "its composite kernel computes float16 and bfloat16 in their own precision; the CPU and CUDA kernels in float"},
    {"aten::new_empty_strided", P::kKeepWrapper,
     "its wrapper only allocates, with any strides (overlapping ones too), as it should"},
    {"aten::narrow_copy", P::kKeepWrapper,
     "CUDA runs its composite kernel (narrow, then clone), which raises narrow's errors (an IndexError for a "
     "dimension out of range) where the CPU's kernel fails an internal assert"},
    {"aten::_foreach_add.List", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_add_.List", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_add.Scalar", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_add_.Scalar", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_add.ScalarList", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_add_.ScalarList", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_sub.List", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_sub_.List", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_sub.Scalar", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_sub_.Scalar", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_sub.ScalarList", P::kOwnKernel, kForeachHalfScalars},
    {"aten::_foreach_sub_.ScalarList", P::kOwnKernel, kForeachHalfScalars},
    {"aten::native_dropout", P::kOwnKernel, "its mask comes from openreg's generator (kernels/dropout.cpp)"},
    {"aten::_nested_view_from_buffer_copy", P::kOwnKernel,
     "its result is a nested tensor, whose sizes the generic kernel cannot read (layouts/layout_kernel.cpp)"},
    {"aten::_thnn_fused_lstm_cell", P::kOwnKernel, "CUDA's fused RNN cells (kernels/rnn_cells.cpp)"},
    {"aten::_thnn_fused_lstm_cell_backward_impl", P::kOwnKernel, "CUDA's fused RNN cells (kernels/rnn_cells.cpp)"},
    {"aten::_thnn_fused_gru_cell", P::kOwnKernel, "CUDA's fused RNN cells (kernels/rnn_cells.cpp)"},
    {"aten::_thnn_fused_gru_cell_backward", P::kOwnKernel, "CUDA's fused RNN cells (kernels/rnn_cells.cpp)"},
    {"aten::_embedding_bag", P::kOwnKernel, kEmbeddingBagResults},
    {"aten::_embedding_bag_forward_only", P::kOwnKernel, kEmbeddingBagResults},
    {"aten::native_layer_norm", P::kOwnKernel, kCudaStats},
    {"aten::native_layer_norm_backward", P::kOwnKernel, kCudaStats},
    {"aten::native_batch_norm", P::kOwnKernel, kCudaStats},
    {"aten::native_batch_norm_backward", P::kOwnKernel, kCudaStats},
    {"aten::batch_norm_backward", P::kOwnKernel, kCudaStats},
    {"aten::native_batch_norm.out", P::kOwnKernel, kCudaStats},
    {"aten::_native_batch_norm_legit", P::kOwnKernel, kCudaStats},
    {"aten::_native_batch_norm_legit.out", P::kOwnKernel, kCudaStats},
    {"aten::_native_batch_norm_legit.no_stats", P::kOwnKernel, kCudaStats},
    {"aten::_batch_norm_with_update", P::kOwnKernel, kCudaStats},
    {"aten::_batch_norm_no_update", P::kOwnKernel,
     "its composite kernel calls the CPU's batch norm directly, refusing other devices (kernels/normalization.cpp)"},
    {"aten::nonzero_static", P::kOwnKernel,
     "CUDA lays its result out column by column, as the meta kernel says; the CPU row by row "
     "(kernels/nonzero_static.cpp)"},
    {"aten::max_unpool2d", P::kOwnKernel, kContiguousUnpool},
    {"aten::max_unpool2d.out", P::kOwnKernel, kContiguousUnpool},
    {"aten::max_unpool3d", P::kOwnKernel, kContiguousUnpool},
    {"aten::max_unpool3d.out", P::kOwnKernel, kContiguousUnpool},
    {"aten::_softmax", P::kOwnKernel, kHalfToFloat},
    {"aten::_softmax.out", P::kOwnKernel, kHalfToFloat},
    {"aten::_log_softmax", P::kOwnKernel, kHalfToFloat},
    {"aten::_log_softmax.out", P::kOwnKernel, kHalfToFloat},
    {"aten::_softmax_backward_data", P::kOwnKernel, kHalfToFloat},
    {"aten::_softmax_backward_data.out", P::kOwnKernel, kHalfToFloat},
    {"aten::_log_softmax_backward_data", P::kOwnKernel, kHalfToFloat},
    {"aten::_log_softmax_backward_data.out", P::kOwnKernel, kHalfToFloat},
    {"aten::histc", P::kOwnKernel, kIntegerHistc},
    {"aten::histc.out", P::kOwnKernel, kIntegerHistc},
    {"aten::_embedding_bag_backward", P::kOwnKernel,
     "ATen's own kernel, which builds a sparse gradient from the device's ops (kernels/embedding_bag.cpp)"},
    {"aten::linalg_lu_factor_ex", P::kOwnKernel, kLuWithoutPivoting},
    {"aten::linalg_lu_factor_ex.out", P::kOwnKernel, kLuWithoutPivoting},
    {"aten::linalg_lu", P::kOwnKernel, kLuWithoutPivoting},
    {"aten::linalg_lu.out", P::kOwnKernel, kLuWithoutPivoting},
    {"aten::linalg_lstsq.out", P::kOwnKernel,
     "CUDA solves with gels alone, its default, and refuses other drivers; the CPU defaults to gelsy "
     "(kernels/lstsq.cpp)"},
    {"aten::mm.dtype", P::kOwnKernel, kFloatMatmul},
    {"aten::mm.dtype_out", P::kOwnKernel, kFloatMatmul},
    {"aten::addmm.dtype", P::kOwnKernel, kFloatMatmul},
    {"aten::addmm.dtype_out", P::kOwnKernel, kFloatMatmul},
    {"aten::bmm.dtype", P::kOwnKernel, kFloatMatmul},
    {"aten::bmm.dtype_out", P::kOwnKernel, kFloatMatmul},
    {"aten::baddbmm.dtype", P::kOwnKernel, kFloatMatmul},
    {"aten::baddbmm.dtype_out", P::kOwnKernel, kFloatMatmul},
    {"aten::_fused_moving_avg_obs_fq_helper", P::kOwnKernel,
     "CUDA's observer takes float16 and bfloat16, rounding its running statistics to them; the CPU's refuses them "
     "(kernels/fused_observer.cpp)"},
    {"aten::cholesky_inverse", P::kOwnKernel, kSolvedInverse},
    {"aten::cholesky_inverse.out", P::kOwnKernel, kSolvedInverse},
    {"aten::_int_mm", P::kOwnKernel, kInt8Shapes},
    {"aten::_int_mm.out", P::kOwnKernel, kInt8Shapes},
    {"aten::add.Tensor", P::kOwnKernel, kWideScalars},
    {"aten::add_.Tensor", P::kOwnKernel, kWideScalars},
    {"aten::add.out", P::kOwnKernel, kWideScalars},
    {"aten::sub.Tensor", P::kOwnKernel, kWideScalars},
    {"aten::sub_.Tensor", P::kOwnKernel, kWideScalars},
    {"aten::sub.out", P::kOwnKernel, kWideScalars},
    {"aten::nansum", P::kOwnKernel, "CUDA sums complex inputs, which the CPU's front end refuses (kernels/nansum.cpp)"},
    {"aten::nansum.out", P::kOwnKernel,
     "CUDA sums complex inputs, which the CPU's front end refuses (kernels/nansum.cpp)"},
    {"aten::_fused_sdp_choice", P::kOwnKernel,
     "SDPA picks the PrivateUse1 fused attention backend, as a real accelerator does (kernels/attention.cpp)"},
    {"aten::_scaled_dot_product_fused_attention_overrideable", P::kOwnKernel,
     "the fused attention a real accelerator provides (kernels/attention.cpp)"},
    {"aten::_scaled_dot_product_fused_attention_overrideable_backward", P::kOwnKernel,
     "the fused attention a real accelerator provides (kernels/attention.cpp)"},
    {"aten::eq.Scalar", P::kHot, kLoopReason},
    {"aten::ne.Scalar", P::kHot, kLoopReason},
    {"aten::ge.Scalar", P::kHot, kLoopReason},
    {"aten::gt.Scalar", P::kHot, kLoopReason},
    {"aten::le.Scalar", P::kHot, kLoopReason},
    {"aten::lt.Scalar", P::kHot, kLoopReason},
    {"aten::eq.Tensor", P::kHot, kLoopReason},
    {"aten::ne.Tensor", P::kHot, kLoopReason},
    {"aten::ge.Tensor", P::kHot, kLoopReason},
    {"aten::gt.Tensor", P::kHot, kLoopReason},
    {"aten::le.Tensor", P::kHot, kLoopReason},
    {"aten::lt.Tensor", P::kHot, kLoopReason},
    {"aten::all", P::kHot, kLoopReason},
    {"aten::any", P::kHot, kLoopReason},
    {"aten::mul.Tensor", P::kHot, kHotReason},
    {"aten::mul_.Tensor", P::kHot, kHotReason},
    {"aten::mul.Scalar", P::kHot, kHotReason},
    {"aten::div.Tensor", P::kHot, kHotReason},
    {"aten::div_.Tensor", P::kHot, kHotReason},
    {"aten::div.Scalar", P::kHot, kHotReason},
    {"aten::relu", P::kHot, kHotReason},
    {"aten::relu_", P::kHot, kHotReason},
    {"aten::threshold_backward", P::kHot, kHotReason},
    {"aten::sigmoid", P::kHot, kHotReason},
    {"aten::sigmoid_backward", P::kHot, kHotReason},
    {"aten::tanh", P::kHot, kHotReason},
    {"aten::tanh_backward", P::kHot, kHotReason},
    {"aten::gelu", P::kHot, kHotReason},
    {"aten::gelu_backward", P::kHot, kHotReason},
    {"aten::where.self", P::kHot, kHotReason},
    {"aten::mm", P::kHot, kHotReason},
    {"aten::addmm", P::kHot, kHotReason},
    {"aten::bmm", P::kHot, kHotReason},
    {"aten::sum.dim_IntList", P::kHot, kHotReason},
    {"aten::mean.dim", P::kHot, kHotReason},
    {"aten::nll_loss_forward", P::kHot, kHotReason},
    {"aten::nll_loss_backward", P::kHot, kHotReason},
    {"aten::addcmul_", P::kHot, kHotReason},
    {"aten::addcdiv_", P::kHot, kHotReason},
    {"aten::lerp_.Scalar", P::kHot, kHotReason},
    {"aten::_foreach_mul_.Scalar", P::kHot, kHotReason},
    {"aten::mm.out", P::kHot, "torch.compile's wrappers call it for every matmul"},
    {"aten::addmm.out", P::kHot, "torch.compile's wrappers call it for every matmul"},
    {"aten::bmm.out", P::kHot, "torch.compile's wrappers call it for every matmul"},
};

// Splits "aten::name.overload" at the overload ("" for the default one).
std::pair<std::string_view, std::string_view> split(std::string_view op) {
  const auto dot = op.find('.');
  if (dot == std::string_view::npos) return {op, ""};
  return {op.substr(0, dot), op.substr(dot + 1)};
}

bool matches(std::string_view row, const c10::OperatorName& op) {
  const auto [name, overload] = split(row);
  return name == op.name && (overload == "*" || overload == op.overload_name);
}

}  // namespace

c10::ArrayRef<OpPolicy> op_policies() { return kTable; }

bool has_policy(const c10::OperatorName& op, Policy policy) {
  for (const auto& row : kTable) {
    if (row.policy == policy && matches(row.op, op)) return true;
  }
  return false;
}

std::vector<std::string> registered_names(Policy policy) {
  std::vector<std::string> names;
  for (const auto& row : kTable) {
    if (row.policy != policy) continue;
    const auto [name, overload] = split(row.op);
    TORCH_INTERNAL_ASSERT(overload != "*", "op_policy.cpp: '", row.op,
                          "' registers a kernel, so it names one overload");
    std::string unqualified(name.substr(name.find("::") + 2));
    names.push_back(overload.empty() ? unqualified : unqualified + "." + std::string(overload));
  }
  return names;
}

const char* policy_name(Policy policy) {
  switch (policy) {
    case P::kHostResults:
      return "host results";
    case P::kHostUnlessTraining:
      return "host unless training";
    case P::kChecksValues:
      return "checks values";
    case P::kCpuIndices:
      return "cpu indices";
    case P::kFusedOptimizer:
      return "fused optimizer";
    case P::kNoCpuScalar:
      return "no cpu scalar";
    case P::kRangeFromValues:
      return "range from values";
    case P::kBypassComposite:
      return "bypass composite";
    case P::kOverrideable:
      return "overrideable";
    case P::kKeepWrapper:
      return "keep wrapper";
    case P::kHot:
      return "hot";
    case P::kOwnKernel:
      return "own kernel";
  }
  return "?";
}

}  // namespace openreg::eager
