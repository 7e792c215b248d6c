// ATen's `_embedding_bag_backward` kernel (the CPU's and CUDA's alike) only
// checks its arguments and chooses: the sparse gradient, a composite of dense
// ops and a COO constructor, or `_embedding_bag_dense_backward`. openreg
// registers the same kernel, so that a sparse gradient is built from openreg's
// ops as on CUDA; through the generic kernel, the CPU's would make a CPU sparse
// tensor that a dense op's result cannot be.
#include <ATen/ops/_embedding_bag_backward_native.h>
#include <torch/library.h>

namespace openreg::eager {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_embedding_bag_backward", TORCH_FN(at::native::_embedding_bag_backward_symint));
}

}  // namespace openreg::eager
