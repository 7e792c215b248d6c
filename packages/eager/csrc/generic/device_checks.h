#pragma once
// The ATen ops whose CUDA kernels sit behind torchgen's device check: every
// tensor among their out= and positional arguments must be on one device, a
// 0-dim CPU tensor too (`x.clamp(max=torch.tensor(1.))` raises on CUDA). The
// list is read from the torch built against (hatch_build.py writes it).
#include <c10/util/ArrayRef.h>

#include <string_view>

namespace openreg::eager {

// Sorted, qualified names with their overloads ("aten::clamp.Tensor").
c10::ArrayRef<std::string_view> device_checked_ops();

}  // namespace openreg::eager
