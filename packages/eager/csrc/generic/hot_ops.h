#pragma once
#include <torch/library.h>

namespace openreg::eager {

// Registers typed PrivateUse1 kernels for the hottest ATen ops; they run the
// generic kernel without boxing their arguments.
void register_hot_ops(torch::Library& lib);

}  // namespace openreg::eager
