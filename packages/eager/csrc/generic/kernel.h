#pragma once
// The generic kernel, which runs any ATen op that has a CPU kernel on openreg
// memory. Boxed for the dispatcher's fallback; hot ops enter through typed
// kernels (hot_ops.cpp) that skip boxing.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

namespace openreg::eager {

// Inline for the usual one or two results: no heap allocation per launch.
using Results = c10::SmallVector<c10::IValue, 2>;

// Runs `op` on openreg: its CPU kernel on device memory. A result that is one
// of the arguments (in-place and out= ops) comes back None: the caller holds
// that argument. `args` are only read, so they may be borrowed.
Results run_op(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

struct OpInfo;
// The openreg device `op` runs on. As on CUDA, tensors of one op must be on
// one device, CPU scalars (0-dim tensors) and CPU indices excepted.
c10::DeviceIndex common_device(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info);

void generic_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace openreg::eager
