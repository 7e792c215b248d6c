#pragma once
// What openreg knows about individual ATen ops, in one table (op_policy.cpp).
// An op with no row is served by the generic kernel from its schema alone; a
// row says how an op differs and why. "Adding or fixing an op" in the eager
// README says which kind of change an op needs.
#include <ATen/core/operator_name.h>
#include <c10/util/ArrayRef.h>

#include <string>
#include <string_view>
#include <vector>

namespace openreg::eager {

enum class Policy {
  // Its meta kernel describes some results differently from the CPU kernel:
  // the op runs on the host, whose results are the CPU kernel's own.
  kHostResults,
  // Batch norm in eval mode: as kHostResults (the meta kernel sizes the saved
  // statistics by channel where the CPU kernel returns them empty).
  kHostUnlessTraining,
  // Its CPU kernel raises on what LAPACK found in the values (a matrix not
  // positive-definite, an iteration that did not converge), as CUDA's does by
  // reading LAPACK's status on the host: it runs at the call, synchronising.
  kChecksValues,
  // Takes CPU tensors as its `indices` argument, as CUDA does.
  kCpuIndices,
  // A fused optimizer: takes a CPU tensor of any shape as its `lr`, which
  // CUDA's reads on the host (item()), and refuses a CPU `grad_scale` or
  // `found_inf`, which CUDA's reads on the device.
  kFusedOptimizer,
  // Refuses a CPU scalar as its `index`, `atol` or `rtol`: CUDA's kernel
  // reshapes it before it meets device tensors, where it is no longer 0-dim.
  kNoCpuScalar,
  // With min == max its range comes from the input's values, which CUDA reads
  // on the host at the call.
  kRangeFromValues,
  // PyTorch gives it a composite kernel for devices it does not know; the
  // generic kernel is registered over it so that the CPU kernel serves it.
  kBypassComposite,
  // A "_overrideable" op with no kernel: the CPU op doing the same work serves it.
  kOverrideable,
  // Its composite kernel is what CUDA runs and should be (a structured wrapper
  // that only allocates, or CUDA's own way): the generic kernel is not
  // registered over it.
  kKeepWrapper,
  // A typed kernel (hot_ops.cpp) runs the generic kernel without boxing.
  kHot,
  // A kernel of its own (kernels/), as a real device has.
  kOwnKernel,
};

struct OpPolicy {
  // One overload ("aten::addr" is the default one, "aten::addr.out" another),
  // or every overload ("aten::histc.*") for a policy that registers no kernel.
  std::string_view op;
  Policy policy;
  std::string_view reason;
};

c10::ArrayRef<OpPolicy> op_policies();
bool has_policy(const c10::OperatorName& op, Policy policy);
// The overloads that a registering policy names, unqualified ("addr.out"), as
// torch::Library::impl takes them.
std::vector<std::string> registered_names(Policy policy);
const char* policy_name(Policy policy);

}  // namespace openreg::eager
