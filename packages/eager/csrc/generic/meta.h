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

struct MetaResult {
  // Per result: one entry for a Tensor, several for a Tensor[], none for None.
  std::vector<std::vector<TensorMeta>> results;
  // Per argument: the shape an out=/in-place tensor argument has after the call.
  std::vector<std::optional<TensorMeta>> written;
};

// nullptr when the op cannot run on meta tensors: it has no meta kernel, or
// its output shape depends on the data (nonzero, unique, ...).
std::shared_ptr<const MetaResult> infer_meta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args,
                                             bool use_cache);

TensorMeta meta_of(const at::Tensor& t);

}  // namespace openreg::eager
