#pragma once
// The generic kernel's results on the device: allocating them as the meta
// kernel describes, packing them as the schema returns them, and preparing
// out= tensors, for both the queued path (kernel.cpp) and the path that runs
// at the call (at_call.cpp).
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include "host_call.h"
#include "kernel.h"
#include "meta.h"
#include "op_info.h"

namespace openreg::eager {

// One result's tensors: one for a Tensor, any number for a Tensor[].
using Tensors = c10::SmallVector<at::Tensor, 1>;

at::Tensor allocate(const TensorMeta& m);
// A device tensor with what a CPU kernel returned: its values, layout, and
// conjugate and negative bits (strided tensors only).
at::Tensor adopt(const at::Tensor& cpu);
// A Tensor's, or a list's elements (undefined for None); none for None.
Tensors tensors_of(const c10::IValue& v);
c10::IValue pack(Tensors&& tensors, const c10::Argument& ret);
bool same_shape(const at::Tensor& t, const TensorMeta& m);
// Out= tensors a queued call's CPU kernel will resize take, at the launch, the
// shape and capacity the meta kernel gives them (device memory cannot grow
// inside a kernel).
void resize_written(c10::ArrayRef<c10::IValue> args, const MetaResult& meta);
// A CPU kernel grew the host alias of `device` (HostAlias::storage, growable)
// into host memory, `host`: the device storage grows as the CPU's would, for
// every tensor that shares it, and takes `host`'s bytes.
void grow_on_device(const c10::Storage& device, const c10::Storage& host);
// The out= overload writes results in place; it cannot skip a result.
bool writes_via_out(const OpInfo& info, const MetaResult& meta);
// Whether the meta kernel lays out a result it allocates other than contiguously.
bool lays_out_strided(const OpInfo& info, const MetaResult& meta);
// The results the meta kernel describes, allocated on the device (None for
// one written in place: the caller holds that argument). With `call`, they
// are its out= tensors.
Results allocate_results(const c10::OperatorHandle& op, const OpInfo& info, const MetaResult& meta, HostCall* call);

// While it lives, drops ATen's warning that an out= tensor was resized: around the out= kernel that writes a
// functional call's results, into tensors openreg allocated, which the functional call's own never warns about
// (isin(5, t): the Python meta kernel gives the result's shape, the out= kernel first resizes it to [0]).
class OwnOutputs : public c10::WarningHandler {
 public:
  OwnOutputs() : next_(c10::WarningUtils::get_warning_handler()), guard_(this) {}
  void process(const c10::Warning& warning) override;

 private:
  c10::WarningHandler* next_;
  c10::WarningUtils::WarningHandlerGuard guard_;
};

}  // namespace openreg::eager
