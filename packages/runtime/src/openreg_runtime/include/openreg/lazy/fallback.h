#pragma once
// An op can reach openreg before its layers loaded: calls through torch.ops
// skip torch's device lazy initialisation, and C++ entry points
// (torch.Stream("openreg")) load the glue alone. libopenreg_lazy catches such
// an op: from `import torch` on with a kernel on each factory (nothing else
// can reach the device before the glue made a tensor), and from the glue's
// loading on with the PrivateUse1 boxed fallback (a dispatch key has one).
// The first op caught before the layers started starts them (Python's
// torch.openreg._lazy_init() where Python runs, else the glue) and dispatches
// again, now to the kernels they registered.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace openreg::lazy {

using FallbackFn = void (*)(const c10::OperatorHandle&, torch::jit::Stack*);
// Called by the glue as it loads: the policy the fallback runs once started.
void attach_fallback(FallbackFn fn);
// Called as openreg-eager installs its kernel: every layer is loaded.
void mark_started();
// Called by the glue's factories. The glue loads ahead of the layers when a
// C++ entry point reaches the device first (Tensor.to's device guard, as
// torch.nested.nested_tensor(..., device="openreg") makes its buffer), and a
// nested, sparse or quantized tensor made then reaches kernels that no
// fallback of this library catches: the first tensor starts the layers.
void ensure_started();

}  // namespace openreg::lazy
