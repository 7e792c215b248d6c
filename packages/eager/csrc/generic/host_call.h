#pragma once
// Running an op's CPU kernel on device memory: the arguments are captured on
// the host at launch (device tensors as HostViews, which do not own memory,
// since device memory is reused in stream order; CPU tensors as copies, read at
// the call as on CUDA) and turned into a CPU stack inside the stream's task.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/util/FunctionRef.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "openreg/glue/launch.h"

namespace openreg::eager {

// The openreg generator a call draws from: its Generator? argument `arg`, or
// the device's default generator when that is None.
at::Generator device_generator(const c10::IValue& arg, c10::DeviceIndex device);
// The numbers of one launch, from `gen` (which moves on, so the
// next launch draws fresh ones whatever this one consumes): a generator the
// CPU's kernels take.
at::Generator take_state(const at::Generator& gen);

class HostCall {
 public:
  // `generator_arg`: index of the op's Generator? argument, or -1. A call run
  // at the call is `growable`: its kernel may grow the storages of device
  // tensors it was given (HostAlias::storage), which the caller then moves to
  // the device.
  HostCall(c10::ArrayRef<c10::IValue> args, int generator_arg, c10::DeviceIndex device, bool growable = false);

  // Appends out= tensors (device results) after the arguments.
  void add_out(const at::Tensor& t);
  // Those out= tensors, in order.
  std::vector<glue::HostView> outs() const;

  // Calls `op`'s CPU kernel on the host views, with or without the out=
  // tensors; returns what it left on the stack. `given`, if not null, gets the
  // arguments the kernel was given, to see what it did to them if it throws.
  torch::jit::Stack run(const c10::OperatorHandle& op, bool with_outs = false,
                        torch::jit::Stack* given = nullptr) const;

  // Device memory the call of `op` reads or writes (opened by strict mode,
  // checked by the stream sanitizer).
  glue::Touches touches(const c10::FunctionSchema& op) const;

  // Runs `kernel` (a call of `op`) keeping track of which device memory holds
  // valid data: an input that a failed task wrote fails this call too, with
  // that failure; a success makes what the call writes (`extra`: results it
  // copies into) valid. A queued call's failure leaves that invalid:
  // `queued_at` is allocation_clock() at its launch, once its results existed
  // (see poison.h); a call at the call (nullopt) raises its failure there.
  void guarded(const c10::OperatorHandle& op, c10::ArrayRef<glue::HostView> extra, std::optional<uint64_t> queued_at,
               c10::function_ref<void()> kernel) const;

 private:
  // A device tensor: an argument, or an element of a list argument.
  struct View {
    glue::HostAlias alias;
    int32_t element;    // -1: the argument itself
    uint32_t shape_at;  // its sizes, then its strides, in shapes_
    int16_t arg;
    uint16_t dim;
    // An earlier view of the same device tensor, or -1: its CPU tensor is that
    // one's, as ATen tells some overlaps by identity alone (an empty out= tensor
    // that is also an input).
    int32_t same_as;
    // The first view of the same device memory, or -1: its CPU storage is that
    // one's, as ATen's overlap checks expect one storage per allocation.
    int32_t storage_as;
    c10::IntArrayRef sizes(const int64_t* shapes) const { return {shapes + shape_at, dim}; }
    c10::IntArrayRef strides(const int64_t* shapes) const { return {shapes + shape_at + dim, dim}; }
  };
  using Seen = c10::SmallVector<const c10::TensorImpl*, 4>;  // views_'s device tensors, while capturing
  void capture(const c10::IValue& v, Seen* seen = nullptr);  // appends to values_ (and views_)
  bool writes(const View& v, const c10::FunctionSchema& op) const;
  void add_view(const at::Tensor& t, int element, Seen* seen);
  void link_views(const Seen& seen);  // sets same_as and storage_as
  glue::HostView view(const View& v) const;

  // Held inline, as the whole call is, in the stream's task: the worker reads
  // what the host wrote there, and every cache line it spans is a transfer
  // between their cores at each op. Shapes share one buffer for the same reason.
  c10::SmallVector<c10::IValue, 6> values_;  // as given; None for a device tensor
  c10::SmallVector<View, 4> views_;          // in argument order
  c10::SmallVector<int64_t, 12> shapes_;
  int n_inputs_ = 0;
  int generator_arg_;
  bool growable_;
  // The device generator's state at launch, lent to the CPU kernel: draws
  // follow the host's order of launches, whenever the task runs.
  mutable at::Generator snapshot_;
  // Captured in a graph, what its replays share: the generator states each
  // replay took at its launch, taken in turn by the runs (a graph draws fresh
  // numbers at every replay); the CPU arguments, without and with the out=
  // tensors, built once (a graph's memory keeps its addresses).
  struct Replayed {
    std::mutex mu;
    std::deque<at::Generator> states;
    std::once_flag built[2];
    torch::jit::Stack stacks[2];
  };
  std::shared_ptr<Replayed> replayed_;
  torch::jit::Stack arguments(bool with_outs) const;
};

}  // namespace openreg::eager
