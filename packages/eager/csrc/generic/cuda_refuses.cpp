#include "cuda_refuses.h"

#include <torch/version.h>

#include <initializer_list>
#include <string_view>

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
    {"aten::convolution", mask({ScalarType::Long})},  // convolution_overrideable's CPU equivalent
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
    {"aten::histogram", kAll},
    {"aten::_histogramdd_bin_edges", kAll},
    {"aten::_histogramdd_from_bin_cts", kAll},
    {"aten::_histogramdd_from_bin_tensors", kAll},
};

// From the dispatcher of a CUDA build of torch: ops with a kernel for the CPU's layout key and no
// kernel, composite ones included, for CUDA's.
struct LayoutRow {
  std::string_view op;
  std::string_view overload;
  c10::DispatchKey key;
};
constexpr LayoutRow kLayoutTable[] = {
    {"aten::sum", "dim_IntList", c10::DispatchKey::NestedTensorPrivateUse1},
    {"aten::_sparse_mm_reduce_impl", "", c10::DispatchKey::SparseCsrPrivateUse1},
};

}  // namespace

c10::DispatchKey cuda_lacks_layout_kernel(const c10::OperatorName& op) {
  for (const LayoutRow& row : kLayoutTable) {
    if (row.op == op.name && row.overload == op.overload_name) return row.key;
  }
  return c10::DispatchKey::Undefined;
}

uint64_t cuda_refused_dtypes(const c10::OperatorName& op) {
  for (const Row& row : kTable) {
    if (row.op == op.name) return row.dtypes;
  }
  return 0;
}

}  // namespace openreg::eager
