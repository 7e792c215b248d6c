#include "cuda_refuses.h"

#include <torch/version.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "word_list.h"

namespace openreg::eager {
namespace {

using c10::ScalarType;

constexpr uint64_t mask(std::initializer_list<ScalarType> dtypes) {
  uint64_t m = 0;
  for (ScalarType t : dtypes) m |= uint64_t{1} << static_cast<int>(t);
  return m;
}

constexpr uint64_t kIntegers =
    mask({ScalarType::Byte, ScalarType::Char, ScalarType::Short, ScalarType::Int, ScalarType::Long});
constexpr uint64_t kHalves = mask({ScalarType::Half, ScalarType::BFloat16});
constexpr uint64_t kAll = ~uint64_t{0};

struct Row {
  std::string_view op;  // "aten::name" for every overload
  uint64_t dtypes;
  std::string_view arg = {};  // CudaRefusal's
  std::string_view values = {};
};

// cuBLAS multiplies floating-point matrices only, cuDNN convolves them; CUDA's pooling, upsampling,
// igamma and angle kernels dispatch fewer dtypes than the CPU's; histogram has
// no CUDA kernel at all.
constexpr Row kTable[] = {
    {"aten::mm", kIntegers},
    {"aten::addmm", kIntegers},
    {"aten::addmm_", kIntegers},
    {"aten::_addmm_activation", kIntegers},
    {"aten::bmm", kIntegers},
    {"aten::baddbmm", kIntegers},
    {"aten::baddbmm_", kIntegers},
    {"aten::addbmm", kIntegers},
    {"aten::addbmm_", kIntegers},
    {"aten::addmv", kIntegers},
    {"aten::addmv_", kIntegers},
    {"aten::dot", kIntegers},
    {"aten::vdot", kIntegers},
    {"aten::convolution", kIntegers},                            // convolution_overrideable's CPU equivalent
    {"aten::_trilinear", kIntegers | mask({ScalarType::Bool})},  // bilinear's: its bmm is cuBLAS's on CUDA
    {"aten::max_pool2d_with_indices", kIntegers},
    {"aten::max_pool3d_with_indices", kIntegers},
    {"aten::avg_pool2d", mask({ScalarType::Long})},
    {"aten::avg_pool3d", mask({ScalarType::Long})},
    {"aten::upsample_bilinear2d", mask({ScalarType::Byte})},
    {"aten::upsample_bicubic2d", mask({ScalarType::Byte})},
    {"aten::_upsample_bilinear2d_aa", mask({ScalarType::Byte})},
    {"aten::_upsample_bicubic2d_aa", mask({ScalarType::Byte})},
    {"aten::igamma", kHalves},
    {"aten::igamma_", kHalves},
    {"aten::igammac", kHalves},
    {"aten::igammac_", kHalves},
#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 14  // torch 2.14's CUDA angle computes them
    {"aten::angle", kHalves},
#endif
    {"aten::histc", kHalves},
    {"aten::native_dropout_backward", kIntegers | mask({ScalarType::Bool})},
    // CUDA's atomic multiply, maximum and minimum take no bool; its sum and mean do
    {"aten::scatter_reduce", mask({ScalarType::Bool}), "reduce", "prod amax amin"},
    {"aten::scatter_reduce_", mask({ScalarType::Bool}), "reduce", "prod amax amin"},
    {"aten::_embedding_bag_dense_backward", mask({ScalarType::BFloat16}), "mode", "2"},  // mode='max'
    {"aten::histogram", kAll},
    {"aten::_histogramdd_bin_edges", kAll},
    {"aten::_histogramdd_from_bin_cts", kAll},
    {"aten::_histogramdd_from_bin_tensors", kAll},
};

}  // namespace

CudaRefusal cuda_refusal(const c10::OperatorName& op) {
  for (const Row& row : kTable) {
    if (row.op == op.name) return {row.dtypes, row.arg, row.values};
  }
  return {};
}

bool refused_for_argument(const CudaRefusal& refusal, const c10::FunctionSchema& schema,
                          c10::ArrayRef<c10::IValue> args, std::string* why) {
  if (refusal.arg.empty()) return true;
  const c10::IValue& value = args[*schema.argumentIndexWithName(refusal.arg)];
  const std::string given = value.isString() ? value.toStringRef() : std::to_string(value.toInt());
  if (!lists(refusal.values, given)) return false;
  *why = " with " + std::string(refusal.arg) + "=" + (value.isString() ? "'" + given + "'" : given);
  return true;
}

}  // namespace openreg::eager
