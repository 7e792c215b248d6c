#pragma once
// Dtypes CUDA computes for an op where the CPU kernel has no loop for them
// (complex32 `exp`, float16 `avg_pool3d`, ...). CUDA's kernels compute those in
// a wider type anyway (float for float16, complex<float> for complex32) and
// round once; openreg runs the CPU kernel in that wider type and rounds back.
// Only the (op, dtype) pairs CUDA computes are listed, so that openreg refuses
// what CUDA refuses.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace openreg::eager {

// After the CPU kernel of `op` failed on `stack` (its arguments): calls it in
// the wider dtype, leaving its results on `stack`, where the table lists the op
// with an argument's dtype. False (`stack` as given) where it does not, or
// where that call fails too: the CPU kernel's own error is the one to raise.
bool call_in_cuda_dtype(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openreg::eager
