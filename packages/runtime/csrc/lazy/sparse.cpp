// torch.sparse_coo_tensor(size, device="openreg") makes its tensor without
// asking torch.openreg first, as torch's other constructors do: when that is
// the device's first use, openreg's layers load here, before the tensor's
// first op needs their kernels.
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <Python.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/library.h>

namespace openreg::lazy {
namespace {

at::Tensor sparse_with_dims(int64_t sparse_dim, int64_t dense_dim, at::IntArrayRef size,
                            std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                            std::optional<at::Device> device, std::optional<bool> pin_memory) {
  if (Py_IsInitialized()) torch::utils::device_lazy_init(c10::DeviceType::PrivateUse1);  // (none in a C++ program)
  return at::native::new_with_dims_sparse(sparse_dim, dense_dim, size, dtype, layout, device, pin_memory);
}

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) { m.impl("_sparse_coo_tensor_with_dims", &sparse_with_dims); }

}  // namespace
}  // namespace openreg::lazy
