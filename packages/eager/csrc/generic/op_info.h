#pragma once
// What the generic kernel needs to know about an operator, read once from its
// schema: which arguments it writes, which inputs its results alias, and the
// out= overload that lets a functional op write straight into device memory.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DispatchKey.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "cuda_refuses.h"

namespace openreg::eager {

struct OpInfo {
  // Results alias an input without writing it (view ops): they share memory.
  bool view = false;
  // Some result is not a tensor (bool, int, float...), so the host needs its
  // value, the meta kernel cannot be trusted to describe the results, or the
  // kernel raises on values it computed (kChecksValues).
  bool host_result = false;
  // Per result, the argument it aliases (in-place and out= ops), or -1.
  std::vector<int> result_alias;
  // The arguments it writes (Tensor(a!)), results or not (batch norm's running
  // statistics).
  std::vector<int> written;
  // The out= overload taking the same arguments plus one out tensor per
  // result, when this is a functional op that has one.
  std::optional<c10::OperatorHandle> out_variant;
  // Index of a Generator? argument, or -1.
  int generator_arg = -1;
  // Index of a Device? argument (factories), or -1.
  int device_arg = -1;
  // Index of a factory's `pin_memory` flag, or -1.
  int pin_memory_arg = -1;
  // A _foreach_ op, whose lists may span devices (per_device.h).
  bool foreach = false;
  bool has_cpu_kernel = false;
  // Index of a `training` flag that, when false, sends the op to the host, or -1.
  int host_unless_training = -1;
  // It runs on the host for openreg's reasons alone (a kHostResults or
  // kHostUnlessTraining row) where CUDA queues it: the sync debug mode, which
  // reports what blocks on CUDA, does not report it.
  bool host_unlike_cuda = false;
  // Accepts CPU tensors as its `indices` argument, as CUDA does.
  bool cpu_indices_ok = false;
  // Per argument, which CPU tensors it takes, as on CUDA: none where it is
  // written (or is index_fill's index, a fused optimizer's grad_scale or
  // found_inf), 0-dim ones it reads, any as an index op's `indices` or a fused
  // optimizer's `lr`, where the schema names it `cpu_...` or as a nested
  // tensor's sizes/strides/offsets.
  enum class CpuArg : uint8_t { kNone, kScalar, kAny };
  std::vector<CpuArg> cpu_args;
  // The arguments CUDA's generated wrapper requires on one device, in the
  // order it checks them (device_checks.h), or none where it makes no check.
  std::vector<int> device_checked;
  // Computed by a TensorIterator, which on CUDA takes one CPU scalar at most.
  bool one_cpu_scalar = false;
  // histc: with min == max its range comes from the input's values, which CUDA
  // reads on the host, raising a non-finite range at the call; so does openreg.
  bool range_from_values = false;
  // Autograd's efficient zero tensors (no memory) may reach this op's backend
  // kernel: it has a ZeroTensor entry of its own, a fallthrough (mul.Scalar,
  // dot) or a kernel that may pass them on, where torch's fallback gives every
  // other op real zeros.
  bool takes_zero_tensors = false;
  // The dtypes of its first tensor argument that CUDA has no kernel for (cuda_refuses.h).
  CudaRefusal cuda_refused;
  // The openreg key (PrivateUse1 or a layout's) CUDA has no kernel of it for (cuda_lacks.h), Undefined for
  // none: refused before anything else, as by CUDA's dispatcher.
  c10::DispatchKey cuda_lacks_kernel = c10::DispatchKey::Undefined;
};

const OpInfo& op_info(const c10::OperatorHandle& op);

}  // namespace openreg::eager
