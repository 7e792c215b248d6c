// Copies between the host and openreg devices and between openreg devices.
// All of them are tasks on a stream, so they are ordered with kernels; a copy
// to or from pageable host memory waits for itself, one to or from pinned
// memory with non_blocking=True does not (as on CUDA).
#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstring>

#include "openreg/core/graph.h"
#include "openreg/glue/allocator.h"
#include "openreg/glue/kernel_warnings.h"
#include "openreg/glue/launch.h"
#include "openreg/glue/sync_debug.h"

namespace openreg::glue {
namespace {

bool stays_async(const at::Tensor& host, bool non_blocking) { return non_blocking && is_pinned(host.storage().data()); }

// The CPU's copy kernel warns when it drops an imaginary part; CUDA's copy_ warns
// at the call, so such a copy runs at the call, in stream order, rather than
// holding the warning for the next call into openreg. A graph capture that
// forbids waiting for the stream records it instead.
bool warns(const at::Tensor& src, const at::Tensor& dst) { return src.is_complex() && !dst.is_complex(); }

template <typename F>
void queue_or_run(bool at_call, c10::DeviceIndex device, const char* name, Touches touches, F&& copy) {
  if (at_call && may_wait(openreg::current_stream(device))) {
    run_in_order(device, name, std::move(touches), copy);
  } else {
    launch(device, name, std::move(touches), std::forward<F>(copy));
  }
}

// A copy between the host and `device`: queued when it may stay asynchronous, else run at the call.
template <typename F>
void to_or_from_host(c10::DeviceIndex device, const char* name, Touch on_device, bool async, bool at_call, F&& copy) {
  if (async) {
    queue_or_run(at_call, device, name, {on_device}, std::forward<F>(copy));
  } else {
    on_host_sync(name);
    run_in_order(device, name, {on_device}, copy);
  }
}

// The CPU's copy kernel refuses some conversions (to or from bit, sub-byte and
// bare quantized dtypes), as CUDA's does, by the dtypes alone: the refusal is
// raised at the call, found by converting one CPU element of the same dtypes
// the first time a pair is seen.
void check_converts(const at::Tensor& src, const at::Tensor& dst) {
  // A complex source is tried as its real type: dropping an imaginary part warns
  // once per process, which belongs to the real copy.
  const auto from = warns(src, dst) ? c10::toRealValueType(src.scalar_type()) : src.scalar_type();
  const auto to = dst.scalar_type();
  if (from == to) return;
  static std::array<std::atomic<bool>, c10::NumScalarTypes * c10::NumScalarTypes> converts{};
  std::atomic<bool>& known = converts[static_cast<int>(from) * c10::NumScalarTypes + static_cast<int>(to)];
  if (known.load(std::memory_order_relaxed)) return;
  kernel_warnings::Discard discard;
  c10::WarningUtils::WarningHandlerGuard guard(&discard);
  auto one = [](c10::ScalarType dtype) {
    at::Tensor t(at::detail::empty_cpu({1}, dtype, std::nullopt, std::nullopt, std::nullopt, std::nullopt));
    std::memset(t.mutable_data_ptr(), 0, t.nbytes());
    return t;
  };
  one(to).copy_(one(from));
  known.store(true, std::memory_order_relaxed);
}

// Makes `waiter` (current stream of its device) wait for the work queued so
// far on the current stream of `device`.
void order_after(c10::DeviceIndex waiter, c10::DeviceIndex device) {
  Event e;
  checked([&] {
    e.record(openreg::current_stream(device));
    e.block(openreg::current_stream(waiter));
  });
}

// A copy of invalid data (a failed task's result) is invalid, and raises that failure.
void copy_valid(const HostView& s, const HostView& d, uint64_t launched_at) {
  if (auto failure = poisoned(s.base)) {
    poison(d.base, launched_at, failure);
    throw AsyncError(failure->what(), failure->cause);
  }
  d.tensor().copy_(s.tensor());
  unpoison(d.base, launched_at);
}

void copy_between_devices(const at::Tensor& src, const at::Tensor& dst) {
  // The copy runs on the source device's stream after the destination's
  // pending work; the destination's stream then waits for the copy.
  const auto from = src.device().index(), to = dst.device().index();
  order_after(from, to);
  HostView s = HostView::of(src), d = HostView::written(dst);
  queue_or_run(warns(src, dst), from, "copy (openreg to openreg)", {s.data(), Touch(d.data(), /*write=*/true)},
               [s, d, at = allocation_clock()] { copy_valid(s, d, at); });
  order_after(to, from);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  // Checked here, not in the task, so a bad call fails at the call, with the sentences of the CPU's
  // TensorIterator, which broadcasts the destination with the source and refuses to resize the destination.
  const auto shape = at::infer_size_dimvector(dst.sizes(), self.sizes());
  TORCH_CHECK(dst.sizes() == c10::IntArrayRef(shape), "output with shape ", dst.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
  if (dst.numel() == 0) return dst;
  // The CPU's copy_ checks these before writing (its TensorIterator does).
  at::assert_no_internal_overlap(dst);
  if (self.device() == dst.device()) at::assert_no_partial_overlap(dst, self);
  check_converts(self, dst);
  if (self.is_cpu()) {
    HostView d = HostView::written(dst);
    to_or_from_host(dst.device().index(), "copy (host to openreg)", Touch(d.data(), /*write=*/true),
                    stays_async(self, non_blocking), warns(self, dst), [d, src = self, at = allocation_clock()] {
                      d.tensor().copy_(src);
                      unpoison(d.base, at);
                    });
  } else if (dst.is_cpu()) {
    HostView s = HostView::of(self);
    to_or_from_host(self.device().index(), "copy (openreg to host)", s.data(), stays_async(dst, non_blocking),
                    warns(self, dst), [s, dst] {
                      check_valid(s);
                      dst.copy_(s.tensor());
                    });
  } else if (self.device() == dst.device()) {
    HostView s = HostView::of(self), d = HostView::written(dst);
    queue_or_run(warns(self, dst), dst.device().index(), "copy (openreg)", {s.data(), Touch(d.data(), /*write=*/true)},
                 [s, d, at = allocation_clock()] { copy_valid(s, d, at); });
  } else {
    copy_between_devices(self, dst);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

// What the CPU's _local_scalar_dense reads, read from device memory without
// making a CPU tensor and dispatching for it; null for the dtypes and lazy
// conjugate/negative views left to it.
std::optional<at::Scalar> read_scalar(const HostView& s) {
  if (s.conj || s.neg) return std::nullopt;
  std::optional<at::Scalar> value;
  switch (s.dtype) {
#define OPENREG_READ(type, name)                             \
  case at::ScalarType::name:                                 \
    value = at::Scalar(*static_cast<const type*>(s.data())); \
    break;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX(OPENREG_READ)
#undef OPENREG_READ
    default:
      break;
  }
  return value;
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  // As the CPU's and CUDA's: the first element (`.item()` checks for one before).
  TORCH_CHECK(self.numel() > 0, "_local_scalar_dense: Empty tensor not supported");
  // Read in place: `.item()` and `bool(t)` are what Python loops over device tensors wait for.
  HostView s = HostView::of(self);
  std::optional<at::Scalar> value;
  constexpr const char* kCall = "reading a scalar (.item(), bool(), a Python loop)";
  on_host_sync(kCall);
  run_in_order(self.device().index(), kCall, {s.data()}, [&] {
    check_valid(s);
    value = read_scalar(s);
    if (!value) value = at::_local_scalar_dense(s.tensor());
  });
  return *value;
}

}  // namespace

// Copies carry conjugate and negative bits into the CPU copy kernel, which
// applies them; materialising them first would copy through this very op.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", &copy_from);
  m.impl("_copy_from_and_resize", &copy_from_and_resize);
  m.impl("_local_scalar_dense", &local_scalar_dense);
}

}  // namespace openreg::glue
