#pragma once
// Ops the CPU has a kernel of for one of openreg's keys and CUDA has none of for
// its own (`to_mkldnn`, nested sum over a dimension, `quantized::mul`): code
// that passes on the CPU raises the dispatcher's NotImplementedError on CUDA,
// and so it does on openreg, at the call. The dispatcher of torch 2.14's CUDA
// build is the reference (test_eager_cuda_refuses.py asks it where it can).
#include <ATen/core/operator_name.h>
#include <c10/core/DispatchKey.h>

namespace openreg::eager {

// The openreg dispatch key (PrivateUse1, or a layout's) for which CUDA lacks a kernel of `op`; Undefined for none.
c10::DispatchKey cuda_lacks_kernel(const c10::OperatorName& op);
// Raises the dispatcher's NotImplementedError for `op` and `key`, as CUDA's dispatcher does for its key.
[[noreturn]] void refuse_as_cuda_lacks(const c10::OperatorName& op, c10::DispatchKey key);

}  // namespace openreg::eager
