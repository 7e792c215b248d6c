#pragma once
// What a kernel for the openreg device needs, and all that an extension
// should include (build it with openreg_runtime.cpp_extension). openreg's own
// example op, openreg::scaled_silu, is written against this alone.
//
//   at::Tensor my_op(const at::Tensor& x) {
//     c10::DeviceGuard guard(x.device());        // the tensor's device is current
//     at::Tensor out = openreg::ext::empty_like(x);
//     auto in = openreg::ext::HostView::of(x), res = openreg::ext::HostView::of(out);
//     openreg::ext::launch(x.device(), "myops::my_op", {in, res}, [in, res] {
//       my_loop(in.tensor(), res.tensor());       // CPU tensors over the device memory
//     });
//     return out;                                 // at once: the kernel runs in stream order
//   }
//
// A launch returns before its kernel runs; kernels of one stream run one at a
// time, in launch order, on a host thread of the device. What a kernel throws
// is raised at the next synchronising call (.cpu(), synchronize()), naming
// the kernel, with the type it had (an IndexError stays one). Under
// OPENREG_STRICT=1 device memory is readable only inside a launch, and only
// the memory of the views the launch names.
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>

#include <initializer_list>
#include <utility>

#include "openreg/glue/allocator.h"
#include "openreg/glue/launch.h"

namespace openreg::ext {

// A device tensor's memory, shape and element type, taken at launch (it does
// not keep the memory alive: device memory is freed in stream order). Inside
// a launch, data() is its first element and tensor() a CPU tensor over it.
using glue::HostView;

// A new contiguous tensor in openreg memory, on `device`.
inline at::Tensor empty(c10::IntArrayRef sizes, at::ScalarType dtype, c10::Device device) {
  c10::DeviceGuard guard(device);
  return at::detail::empty_generic(sizes, glue::device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   dtype, std::nullopt);
}
inline at::Tensor empty_like(const at::Tensor& t) { return empty(t.sizes(), t.scalar_type(), t.device()); }

// The current stream of `device`, as torch.openreg.current_stream() gives it.
inline c10::Stream current_stream(c10::Device device) { return glue::current_stream(device.index()); }

// Queues `kernel` on the current stream of `device` and returns at once.
// `touched`: the views it reads or writes (strict mode opens exactly those).
// `name` must outlive the kernel (a string literal).
template <typename F>
void launch(c10::Device device, const char* name, std::initializer_list<HostView> touched, F&& kernel) {
  glue::Touches touches;
  for (const HostView& v : touched) touches.push_back(v.data());
  glue::launch(device.index(), name, std::move(touches), std::forward<F>(kernel));
}

}  // namespace openreg::ext
