// ATen's `_embedding_bag_backward` kernel (the CPU's and CUDA's alike) only
// checks its arguments and chooses: the sparse gradient, a composite of dense
// ops and a COO constructor, or `_embedding_bag_dense_backward`. openreg
// registers the same kernel, so that a sparse gradient is built from openreg's
// ops as on CUDA; through the generic kernel, the CPU's would make a CPU sparse
// tensor that a dense op's result cannot be.
//
// The forward's extra results (what the backward reads) follow CUDA's
// conventions, which PyTorch's meta kernel assumes for every device but the
// CPU: offset2bag names each index's bag in every mode (the CPU leaves it
// empty on its fast path), bag_size has one entry per offset, and max_indices
// is empty unless mode is max.
#include <ATen/ATen.h>
#include <ATen/ops/_embedding_bag_backward_native.h>
#include <torch/library.h>

#include "../generic/kernel.h"

namespace openreg::eager {
namespace {

constexpr int64_t kModeMax = 2;

// ATen's make_offset2bag: a 1 where each bag starts, summed along the indices.
at::Tensor offset2bag_of(const at::Tensor& offsets, int64_t n_indices) {
  at::Tensor starts = at::zeros({n_indices + 1}, offsets.options());
  starts.index_add_(0, offsets, at::ones_like(offsets));
  return starts.cumsum(0, offsets.scalar_type()).sub_(1).narrow(0, 0, n_indices);
}

void embedding_bag(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor indices = (*stack)[1].toTensor();
  const at::Tensor offsets = (*stack)[2].toTensor();
  const int64_t mode = (*stack)[4].toInt();
  generic_kernel(op, stack);
  c10::IValue* results = &*(stack->end() - 4);
  at::Tensor offset2bag = results[1].toTensor();
  if (offset2bag.numel() != indices.numel()) {
    // In the type indices and offsets promote to, which the backward reads it as.
    const at::ScalarType index_type = at::promote_types(indices.scalar_type(), offsets.scalar_type());
    results[1] = offset2bag_of(offsets.to(index_type), indices.numel());
  }
  const at::Tensor bag_size = results[2].toTensor();
  if (bag_size.size(0) != offsets.size(0)) {
    at::Tensor sized = at::zeros(offsets.sizes(), bag_size.options());
    sized.narrow(0, 0, bag_size.size(0)).copy_(bag_size);
    results[2] = sized;
  }
  if (mode != kModeMax) results[3] = at::empty({0}, results[3].toTensor().options());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_embedding_bag_backward", TORCH_FN(at::native::_embedding_bag_backward_symint));
  m.impl("_embedding_bag", torch::CppFunction::makeFromBoxedFunction<&embedding_bag>());
  m.impl("_embedding_bag_forward_only", torch::CppFunction::makeFromBoxedFunction<&embedding_bag>());
}

}  // namespace openreg::eager
