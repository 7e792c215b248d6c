#pragma once
// What each layout registers for its openreg dispatch keys before
// layout_kernel.cpp serves the rest of their ops (see there).
#include <torch/library.h>

namespace openreg::eager {

void register_sparse_structure(torch::Library& coo, torch::Library& compressed);
void register_quantized_structure(torch::Library& quantized, torch::Library& dense);
void register_quantized_copies(torch::Library& quantized);
void register_nested_random(torch::Library& nested);
void register_nested_dense(torch::Library& nested);

}  // namespace openreg::eager
