#pragma once
// How PyTorch code puts work on an openreg stream. Kernels receive HostViews:
// CPU tensors that alias device memory, so PyTorch's CPU kernels run on it in
// place (zero-copy) inside the stream's worker.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/SmallVector.h>

#include <memory>
#include <utility>

#include "openreg/core/device.h"
#include "openreg/core/error.h"
#include "openreg/core/poison.h"
#include "openreg/core/sanitizer.h"
#include "openreg/core/stream.h"
#include "openreg/core/strict.h"
#include "openreg/glue/kernel_warnings.h"

namespace openreg::glue {

// A device tensor's memory and element type, captured at launch so the task
// does not keep the tensor (and so its memory) alive: device memory is freed
// in stream order. The worker reads it from the host's cache lines at every
// op, so it is kept small.
struct HostAlias {
  void* base = nullptr;  // the whole storage, so that storage offsets keep their meaning; null for "no tensor"
  size_t nbytes = 0;
  int64_t offset = 0;
  at::ScalarType dtype = at::kFloat;
  bool conj = false, neg = false;  // lazy conjugate / negative views

  static HostAlias of(const at::Tensor& t);
  // The first element of a tensor of these sizes; null for "no tensor" or no elements.
  void* data(c10::IntArrayRef sizes) const;
  // A CPU storage over this memory that does not own it. Tensors of one call
  // that share device memory must share one, so ATen's overlap checks see it.
  // A CPU kernel may grow a `growable` one, into host memory, as it would a
  // CPU tensor's: its caller then moves the grown storage to the device.
  c10::Storage storage(bool growable = false) const;
  // The CPU tensor of that shape on this memory; call inside the task.
  at::Tensor tensor(c10::IntArrayRef sizes, c10::IntArrayRef strides) const {
    return tensor(storage(), sizes, strides);
  }
  at::Tensor tensor(c10::Storage storage, c10::IntArrayRef sizes, c10::IntArrayRef strides) const;
};

// A HostAlias with its shape.
// Before a tensor is written: a lazy clone's (copy-on-write) storage gets memory
// of its own, copied in stream order, as mutable_data_ptr() gives it on the CPU
// and CUDA; otherwise the write would reach the tensor it was cloned from.
void materialize_for_write(const at::Tensor& t);

struct HostView : HostAlias {
  c10::SmallVector<int64_t, 8> shape;  // the sizes, then the strides

  HostView() = default;
  HostView(const HostAlias& alias, c10::IntArrayRef sizes, c10::IntArrayRef strides);
  static HostView of(const at::Tensor& t) { return HostView(HostAlias::of(t), t.sizes(), t.strides()); }
  // Of a tensor the task writes: see materialize_for_write.
  static HostView written(const at::Tensor& t) {
    materialize_for_write(t);
    return of(t);
  }
  c10::IntArrayRef sizes() const { return {shape.data(), shape.size() / 2}; }
  c10::IntArrayRef strides() const { return {shape.data() + shape.size() / 2, shape.size() / 2}; }
  void* data() const { return HostAlias::data(sizes()); }
  at::Tensor tensor() const { return HostAlias::tensor(sizes(), strides()); }
};

c10::Stream current_stream(c10::DeviceIndex device);
Stream& core_stream(const c10::Stream& stream);

// Device memory a task reads or writes (core/touch.h).
using Touches = c10::SmallVector<Touch, 8>;

// Raises a task's failure as the c10 error type the task threw (an
// IndexError stays an IndexError), with the message that names the task.
[[noreturn]] void raise_async(const AsyncError& err);

// Runs a core call, turning openreg::Error into a c10::Error with the same
// message (OutOfMemory into torch.OutOfMemoryError, InvalidDevice into
// torch.AcceleratorError as CUDA's invalid device ordinal).
constexpr int32_t kInvalidDeviceCode = 101;  // cudaErrorInvalidDevice, which AcceleratorError.error_code gives
template <typename F>
auto translated(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const AsyncError& err) {
    raise_async(err);
  } catch (const OutOfMemory& err) {
    C10_THROW_ERROR(OutOfMemoryError, err.what());
  } catch (const InvalidDevice& err) {
    throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, kInvalidDeviceCode, err.what());
  } catch (const Error& err) {
    C10_THROW_ERROR(Error, err.what());
  }
}

// translated(f), then passes on what queued kernels warned for this thread
// (the call may have waited for them).
template <typename F>
auto checked(F&& f) -> decltype(f()) {
  struct PassOn {
    ~PassOn() { kernel_warnings::pass_on(); }
  } pass_on;
  return translated(std::forward<F>(f));
}

// The dispatcher's thread-local state of a fresh thread (a worker's), for the
// CPU and meta kernels a host thread runs for openreg: queued work it runs
// instead of waiting, an op run at the call, an op's result worked out on
// meta. As on the device, the caller's dispatch modes, autocast and functorch
// transforms do not see them, nor change what they compute.
class WorkerDispatchState {
 private:
  c10::impl::ForceDispatchKeyGuard keys_{c10::impl::LocalDispatchKeySet(c10::impl::PODLocalDispatchKeySet{})};
};

// What every kernel and copy runs in, on a worker or on a host thread that
// runs it in the worker's place: device memory opened (strict mode); no
// autograd history, and the caller's inference tensors (`with
// torch.inference_mode(): d.cpu()`) writable.
class KernelScope {
 public:
  KernelScope(const Touch* touches, size_t n) : access_(touches, n) {}

 private:
  HostAccess access_;
  WorkerDispatchState dispatch_;
  c10::InferenceMode no_autograd_;
};

// Queues `fn` on the current stream of `device` and returns its sequence
// number. c10 errors thrown by `fn` are reported without their C++ backtrace,
// and raised again with their type; its warnings reach the launching thread
// (kernel_warnings.h). Called from a task (an op that a kernel
// calls), `fn` runs in place and the result is 0.
template <typename F>
uint64_t launch(c10::DeviceIndex device, const char* name, Touches touches, F&& fn) {
  if (in_task()) {
    KernelScope scope(touches.data(), touches.size());  // a host thread holding the stream has none open
    fn();
    return 0;
  }
  // Kept only for strict mode, which alone looks at them in the task: a smaller task
  // is fewer cache lines for the worker to fetch from the host's core.
  auto opened = config().strict ? std::make_unique<Touches>(std::move(touches)) : nullptr;
  const Touches& checked_touches = opened ? *opened : touches;  // for the sanitizer, during the launch
  // What earlier kernels warned, before this one can run: its own warning comes
  // at the thread's next call, whether or not the worker finishes it first.
  kernel_warnings::pass_on();
  return translated([&] {
    return openreg::current_stream(device).launch(
        name,
        [opened = std::move(opened), launcher = kernel_warnings::this_thread(), fn = std::forward<F>(fn)]() mutable {
          KernelScope scope(opened ? opened->data() : nullptr, opened ? opened->size() : 0);
          kernel_warnings::Hold warnings(launcher);
          try {
            fn();
          } catch (const c10::Error& e) {
            throw AsyncError(e.what_without_backtrace(), std::current_exception());
          }
        },
        checked_touches.data(), checked_touches.size());
  });
}

// A short kernel onto an idle stream: runs `fn` at the call, on this thread,
// and returns true; otherwise does nothing and returns false (launch it). The
// trip through the worker, and the host's wait for it, cost more than such a
// kernel, and the host most often reads its result next (`.item()`, a Python
// loop over a tensor). The stream is held meanwhile, as by run_in_order, so
// stream order holds; what `fn` throws is raised here, as on the CPU.
template <typename F>
bool run_now_if_idle(c10::DeviceIndex device, const char* name, F&& fn) {
  if (in_task() || config().strict || sanitizer::on()) return false;
  return checked([&] {
    Stream::InOrder held(openreg::current_stream(device), name, Stream::InOrder::IfIdle{});
    if (!held) return false;
    KernelScope scope(nullptr, 0);
    fn();
    return true;
  });
}

// Runs `fn` at the call, on this thread, in the order of the current stream of
// `device` (after its queued work, before work launched later): what a launch
// followed by a wait for it does, without the trip through the worker. First
// raises a failure pending on the device, as that wait would; then what `fn`
// throws, as it is. `call` names it in the error a graph capture raises.
template <typename F>
void run_in_order(c10::DeviceIndex device, const char* call, Touches touches, F&& fn) {
  if (in_task()) {
    KernelScope scope(touches.data(), touches.size());
    fn();
    return;
  }
  checked([&] {
    Stream& stream = openreg::current_stream(device);
    Stream::InOrder held(stream, call);
    raise_pending_error(device);
    if (sanitizer::on()) sanitizer::host_work(stream, call, touches.data(), touches.size());
    KernelScope scope(touches.data(), touches.size());
    fn();
  });
}

// In a task that reads `source`: raises the failure of the task that left its
// memory invalid, if one did.
inline void check_valid(const HostAlias& source) {
  if (auto failure = poisoned(source.base)) throw AsyncError(failure->what(), failure->cause);
}

// Waits for task `seq` on the current stream of `device`, then raises any
// failure recorded on the device.
void wait(c10::DeviceIndex device, uint64_t seq);

}  // namespace openreg::glue
