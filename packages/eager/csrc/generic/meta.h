#pragma once
// Output shapes, dtypes and strides of an op, worked out on the host by running
// it on meta tensors, and cached per op and argument signature so that a
// training loop pays for it once.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <optional>
#include <vector>

namespace openreg::eager {

struct TensorMeta {
  at::ScalarType dtype;
  std::vector<int64_t> sizes, strides;
  int64_t offset;
  bool defined = true;  // ops such as convolution_backward skip some results
};

// What the first run of a signature showed. Every check a CPU kernel makes
// without reading values passes or fails alike for every call with the same
// signature, so that run is made at the call, where such an error belongs;
// later calls are queued only if it agreed with the meta kernel and warned
// nothing (else they run at the call too, as the CPU does).
enum class Verdict : uint8_t { Unverified, Queue, AtCall };

struct MetaResult {
  // Per result: one entry for a Tensor, several for a Tensor[], none for None.
  std::vector<std::vector<TensorMeta>> results;
  // Per argument: the shape an out=/in-place tensor argument has after the call.
  std::vector<std::optional<TensorMeta>> written;
  mutable Verdict verdict = Verdict::Unverified;  // kept per thread, as the cache is
  // The CPU's out= kernel failed where its functional form worked (it uses its
  // outputs as scratch space of another shape): call the functional form.
  mutable bool functional_only = false;
  // Elements of the tensor arguments and results: what bounds the kernel's time.
  int64_t elements = 0;
};

// nullptr when the op cannot run on meta tensors: it has no meta kernel, or
// its output shape depends on the data (nonzero, unique, ...). With `rethrow`,
// the meta kernel's error is raised instead (a view op's checks are its meta
// kernel's). The cache key covers the arguments' metadata, which arguments
// share memory, and the global state that changes results (default dtype,
// deterministic mode).
std::shared_ptr<const MetaResult> infer_meta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
                                             bool use_cache, bool rethrow = false);

TensorMeta meta_of(const at::Tensor& t);

}  // namespace openreg::eager
