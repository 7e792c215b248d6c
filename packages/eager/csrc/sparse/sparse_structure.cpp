// Sparse ops that only build, inspect or restructure a sparse tensor from its
// dense members, or are written in dense ops (to_dense adds the sparse tensor
// into zeros): ATen's own kernels for them work on any device, so they run
// here without synchronising, and the dense work they do is queued on the
// stream like any dense op. Everything else reaches layouts/layout_kernel.cpp,
// which registers these first. (The size-only constructor,
// _sparse_coo_tensor_with_dims, is the runtime's: csrc/lazy/sparse.cpp.)
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_dimI_native.h>
#include <ATen/ops/_dimV_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_to_dense_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

#include "../layouts/on_named_device.h"
#include "../layouts/registration.h"

namespace openreg::eager {
namespace {

// ATen refuses indices and values on two devices only where they are CUDA's;
// openreg's failed an internal assert of the tensor's instead. CUDA's check.
at::Tensor coo_of_dims_and_tensors(int64_t sparse_dim, int64_t dense_dim, c10::SymIntArrayRef size,
                                   const at::Tensor& indices, const at::Tensor& values,
                                   std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                                   std::optional<at::Device> device, std::optional<bool> pin_memory,
                                   std::optional<bool> is_coalesced) {
  TORCH_CHECK(indices.device().type() != values.device().type() || indices.device() == values.device(),
              "device of indices (", static_cast<int>(indices.get_device()), ") must match device of values (",
              static_cast<int>(values.get_device()), ")");
  return at::native::new_with_dims_and_tensor_sparse_symint(sparse_dim, dense_dim, size, indices, values, dtype, layout,
                                                            device, pin_memory, is_coalesced);
}

}  // namespace

void register_sparse_structure(torch::Library& coo, torch::Library& compressed) {
  coo.impl("_sparse_coo_tensor_with_dims_and_tensors", &OnNamedDevice<&coo_of_dims_and_tensors>::call);
  coo.impl("empty.memory_format", &OnNamedDevice<&at::native::empty_sparse_symint>::call);
  coo.impl("empty_like", &OnNamedDevice<&at::native::empty_like_sparse_coo>::call);
  coo.impl("_indices", &at::native::_indices_sparse);
  coo.impl("_values", &at::native::_values_sparse);
  coo.impl("indices", &at::native::indices_sparse);
  coo.impl("values", &at::native::values_sparse);
  coo.impl("_nnz", &at::native::_nnz_sparse);
  coo.impl("sparse_dim", &at::native::sparse_dim_sparse);
  coo.impl("_dimI", &at::native::sparse_dim_sparse);
  coo.impl("dense_dim", &at::native::dense_dim_sparse);
  coo.impl("_dimV", &at::native::dense_dim_sparse);
  coo.impl("is_coalesced", &at::native::is_coalesced_sparse);
  coo.impl("_coalesced_", &at::native::_coalesced_sparse_);
  coo.impl("sparse_resize_", &at::native::sparse_resize_);
  coo.impl("sparse_resize_and_clear_", &at::native::sparse_resize_and_clear_);
  coo.impl("zero_", &at::native::zero_sparse_);
  coo.impl("copy_", &at::native::copy_sparse_wrapper_);
  coo.impl("copy_sparse_to_sparse_", &at::native::copy_sparse_);
  coo.impl("_to_dense", &at::native::sparse_to_dense);
  compressed.impl("empty.memory_format", &OnNamedDevice<&at::native::empty_sparse_compressed_symint>::call);
  compressed.impl("empty_like", &OnNamedDevice<&at::native::empty_like_sparse_csr>::call);
  compressed.impl("crow_indices", &at::native::crow_indices_sparse_csr);
  compressed.impl("col_indices", &at::native::col_indices_sparse_csr);
  compressed.impl("ccol_indices", &at::native::ccol_indices_sparse_csr);
  compressed.impl("row_indices", &at::native::row_indices_sparse_csr);
  compressed.impl("values", &at::native::values_sparse_csr);
  compressed.impl("_nnz", &at::native::_nnz_sparse_csr);
  compressed.impl("sparse_dim", &at::native::sparse_dim_sparse_csr);
  compressed.impl("dense_dim", &at::native::dense_dim_sparse_csr);
  compressed.impl("resize_", &at::native::resize_sparse_csr_);
  compressed.impl("zero_", &at::native::zero_sparse_csr_);
  compressed.impl("copy_", &at::native::copy_sparse_compressed_);
  compressed.impl("_to_dense", &at::native::sparse_compressed_to_dense);
}

}  // namespace openreg::eager
