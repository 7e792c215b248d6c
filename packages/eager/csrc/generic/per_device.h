#pragma once
// Foreach ops whose lists span devices.
#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>

#include "kernel.h"

namespace openreg::eager {

// A foreach op's lists may hold tensors of several devices, each index's on
// one (an optimizer's parameters on two GPUs): CUDA's kernels take their
// per-tensor path then. This runs each device's part as a call of its own, one
// kernel per device, and gives the results in the lists' order; nullopt when
// the lists are on one device.
std::optional<Results> run_per_device(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);

}  // namespace openreg::eager
