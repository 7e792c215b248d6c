#pragma once
// libopenreg_lazy: what torch sees of openreg from `import torch` on. Torch
// reaches a device through C++ registries (PrivateUse1 hooks, the device
// guard, the device allocator) that C++ entry points such as
// torch.Generator("openreg"), torch.Stream, Tensor.pin_memory and
// torch.accelerator.memory_* consult without asking Python first. This small
// library fills those registries at autoload and loads the glue (C++ only: no
// Python layer, no device start) the first time one of them is used. The
// glue then registers its own guard and allocator, which replace these, and
// hands its hooks over (torch accepts PrivateUse1 hooks only once).
#include <ATen/detail/PrivateUse1HooksInterface.h>

namespace libkineto {
class IActivityProfiler;
}

namespace openreg::lazy {

// Whether torch took openreg's PrivateUse1 hooks (registering them on first call).
bool registered();
// Called by the glue as it loads.
void attach(const at::PrivateUse1HooksInterface* hooks);
bool glue_loaded();
// The glue's hooks, loading the glue on first use; raises when it cannot load.
const at::PrivateUse1HooksInterface& glue();
// The glue's Kineto profiler (glue/kineto.cpp), handed over as it loads:
// Kineto asks for profilers once, when it starts, perhaps before the glue loads.
void attach_profiler(libkineto::IActivityProfiler* profiler);

}  // namespace openreg::lazy
