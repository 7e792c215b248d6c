#pragma once
// The generic kernel's path that runs an op's CPU kernel at the call, in the
// calling thread: the first call of each signature, signatures that must stay
// there, data-dependent shapes and non-tensor results.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <optional>

#include "kernel.h"
#include "meta.h"
#include "op_info.h"
#include "openreg/core/stream.h"

namespace openreg::eager {

// Waits, in the calling thread, for the work queued on the current stream of
// `device`: what runs at the call sees its results. `call` names what waits
// in the error a graph capture raises.
void wait_for_queued_work(c10::DeviceIndex device, const char* call);

// Holds the current stream of `device` while the calling thread works at the call, in its order
// (Stream::InOrder): the work queued on it has run, and what other threads launch on it meanwhile runs after,
// as a kernel launched later does, neither beside the work nor on blocks it has just been given. A task holds
// its own stream already.
class InStreamOrder {
 public:
  InStreamOrder(c10::DeviceIndex device, const char* call);

 private:
  std::optional<openreg::Stream::InOrder> held_;
};

// Runs the CPU kernel now, after the work queued on the stream: its errors are
// raised here with their own type, its warnings are the caller's, and whatever
// it does to its outputs' layout is seen. With `meta`, the results are
// prepared as a queued call would prepare them, and the signature's verdict is
// recorded; without, the kernel's own results are adopted.
Results run_at_call(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args, const OpInfo& info,
                    c10::DeviceIndex device, const MetaResult* meta);

}  // namespace openreg::eager
