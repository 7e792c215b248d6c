// ATen's device-generic sparse code (the COO invariant checks that
// `sparse_coo_tensor(..., check_invariants=True)` runs) calls
// flatten_indices_stub directly with the tensors' device, not through the
// dispatcher; CUDA registers a kernel for it, and so does openreg. Its header
// is not shipped with torch: the declaration below is ATen's own.
#include <ATen/ATen.h>
#include <ATen/native/DispatchStub.h>

namespace at::native {
using flatten_indices_fn = Tensor (*)(const Tensor& indices, IntArrayRef size);
DECLARE_DISPATCH(flatten_indices_fn, flatten_indices_stub)
}  // namespace at::native

namespace openreg::eager {
namespace {

// Each column's row-major position in `size`, as the CPU's kernel gives it,
// in dense ops queued on the stream.
at::Tensor flatten_indices(const at::Tensor& indices, at::IntArrayRef size) {
  at::Tensor flat = at::zeros({indices.size(1)}, indices.options());
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(size.size()) - 1; d >= 0; --d) {
    flat.add_(indices.select(0, d), stride);
    stride *= size[d];
  }
  return flat;
}

}  // namespace
}  // namespace openreg::eager

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(flatten_indices_stub, &openreg::eager::flatten_indices)
}  // namespace at::native
