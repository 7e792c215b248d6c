#pragma once
// Dtypes the CPU computes for an op where CUDA has no kernel for them (integer
// matmuls, integer max pooling, uint8 bilinear upsampling, ...), the mirror of
// cuda_dtypes.h: code that passes on the CPU fails there, and so it does on
// openreg, at the call, with a NotImplementedError naming the op and dtype as
// ATen's dispatch macros do. OpInfo's CUDA dtype lists are the reference
// (test_eager_cuda_refuses.py checks the table against them).
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/operator_name.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace openreg::eager {

struct CudaRefusal {
  uint64_t dtypes = 0;  // of `op`'s first tensor argument, a bit per ScalarType; 0 for none
  // The argument whose value decides, where one does (scatter_reduce's `reduce`), and the values CUDA refuses the
  // dtypes for, space-separated as Python prints them ("prod amax amin"); empty for every call.
  std::string_view arg;
  std::string_view values;
};
CudaRefusal cuda_refusal(const c10::OperatorName& op);

inline bool refused(uint64_t dtypes, c10::ScalarType t) { return (dtypes >> static_cast<int>(t)) & 1u; }
// Whether the argument that decides (none for most ops) has one of the values refused in `args`; if so, `why`
// says which (" with reduce='prod'").
bool refused_for_argument(const CudaRefusal& refusal, const c10::FunctionSchema& schema,
                          c10::ArrayRef<c10::IValue> args, std::string* why);

}  // namespace openreg::eager
