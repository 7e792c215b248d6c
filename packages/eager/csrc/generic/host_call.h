#pragma once
// Running an op's CPU kernel on device memory: the arguments are captured on
// the host at launch (device tensors as HostViews, which do not own memory,
// since device memory is reused in stream order; CPU tensors as copies, read at
// the call as on CUDA) and turned into a CPU stack inside the stream's task.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <c10/util/SmallVector.h>

#include <optional>
#include <vector>

#include "openreg/glue/launch.h"

namespace openreg::eager {

class HostCall {
 public:
  // `generator_arg`: index of the op's Generator? argument, or -1.
  HostCall(c10::ArrayRef<c10::IValue> args, int generator_arg, c10::DeviceIndex device);

  // Appends out= tensors (device results) after the arguments.
  void add_out(const at::Tensor& t);
  // Those out= tensors, in order.
  c10::SmallVector<glue::HostView, 1> outs() const;

  // Calls `op`'s CPU kernel on the host views, with or without the out=
  // tensors; returns what it left on the stack.
  torch::jit::Stack run(const c10::OperatorHandle& op, bool with_outs = false) const;

  // Device memory the call reads or writes (opened by strict mode).
  const glue::Touches& touches() const { return touches_; }

 private:
  struct Arg {
    c10::IValue value;                              // as given, unless a device tensor
    std::optional<glue::HostView> view;             // a device tensor
    std::vector<std::optional<glue::HostView>> list;  // a list holding device tensors
    bool optional_list = false;                     // Tensor?[] rather than Tensor[]
  };
  void capture(const c10::IValue& v);  // appends to args_

  std::vector<Arg> args_;
  size_t n_inputs_ = 0;
  glue::Touches touches_;
  int generator_arg_;
  // The device generator's state at launch, lent to the CPU kernel: draws
  // follow the host's order of launches, whenever the task runs.
  at::Generator snapshot_;
};

}  // namespace openreg::eager
