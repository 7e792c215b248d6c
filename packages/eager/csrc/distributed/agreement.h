#pragma once
// What every rank must agree on before gloo runs a collective. gloo itself
// aborts the process (or hangs) when ranks pass different shapes; orccl first
// gathers each rank's signature and raises, on every rank, an error naming
// what each rank passed.
#include <ATen/ATen.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <vector>

namespace openreg::eager::distributed {

// The collective, its reduction (-1: none) and the dtype and shape of `t`,
// the tensor that must match across ranks (none: only the collective).
std::vector<int64_t> signature(c10d::OpType type, int reduce_op = -1, const at::Tensor* t = nullptr);

// Raises a ValueError on every rank when the ranks' signatures differ.
void check_agreement(c10d::Backend& gloo, const char* name, const std::vector<int64_t>& mine);

}  // namespace openreg::eager::distributed
