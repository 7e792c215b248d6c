#pragma once
// What CUDA checks of a CPU scalar (a 0-dim CPU tensor), read from the
// native_functions.yaml of the torch built against (hatch_build.py writes the
// lists).
#include <c10/util/ArrayRef.h>

#include <string_view>

namespace openreg::eager {

// The ops whose CUDA kernels sit behind torchgen's device check: every tensor
// among their out= and positional arguments must be on one device, a CPU
// scalar too (`x.clamp(max=torch.tensor(1.))` raises on CUDA). Sorted,
// qualified names with their overloads ("aten::clamp.Tensor").
c10::ArrayRef<std::string_view> device_checked_ops();

// The structured ops computed by a TensorIterator, which on CUDA takes at most
// one CPU scalar among its inputs. Sorted, as above.
c10::ArrayRef<std::string_view> tensor_iterator_ops();

}  // namespace openreg::eager
