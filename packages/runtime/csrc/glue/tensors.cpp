// Tensor creation, fills and metadata-only ops (views, resize_, set_) on
// openreg. Views share device memory; nothing here copies data.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/strides.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstring>
#include <vector>

#include "openreg/core/device.h"
#include "openreg/glue/allocator.h"
#include "openreg/glue/launch.h"
#include "openreg/lazy/fallback.h"

namespace openreg::glue {
namespace {

const c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);

// Factories allocate on the current device; an explicit index switches to it.
std::optional<c10::Device> indexed(std::optional<c10::Device> device) {
  return device && device->has_index() ? device : std::nullopt;
}

// Under torch.use_deterministic_algorithms(True), new memory reads as NaN
// (the dtype's largest value for integers), as on the CPU and CUDA, unless
// torch.utils.deterministic.fill_uninitialized_memory is off.
bool fill_new_memory() {
  const auto& ctx = at::globalContext();
  return ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory();
}

at::Tensor empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout>,
                 std::optional<c10::Device> device, std::optional<bool> pin_memory,
                 std::optional<c10::MemoryFormat> memory_format) {
  check_not_pinned(pin_memory);
  lazy::ensure_started();
  c10::OptionalDeviceGuard guard(indexed(device));
  at::Tensor t =
      at::detail::empty_generic(size, device_allocator(), kKeys, c10::dtype_or_default(dtype), memory_format);
  if (fill_new_memory()) at::native::fill_empty_deterministic_(t);
  return t;
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_not_pinned(pin_memory);
  lazy::ensure_started();
  c10::OptionalDeviceGuard guard(indexed(device));
  at::Tensor t =
      at::detail::empty_strided_generic(size, stride, device_allocator(), kKeys, c10::dtype_or_default(dtype));
  if (fill_new_memory()) at::native::fill_empty_deterministic_(t);
  return t;
}

// Forward-mode AD's tangent of a constant, and some backward formulas, are "efficient zero tensors": no memory, and
// the ZeroTensor key in front of the device's makes every op read them as exact zeros (0 * nan stays 0) or turn them
// into real zeros first, as on the CPU and CUDA. Without one, openreg's tangents became NaN where the CPU's are not.
at::Tensor efficient_zero_tensor(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout>,
                                 std::optional<c10::Device> device, std::optional<bool>) {
  // The storage keeps a raw pointer to its allocator: one per device, for the process's lifetime.
  static auto* const allocators = [] {
    auto* all = new std::vector<at::native::ZeroTensorAllocator>();
    all->reserve(device_count());  // never reallocated: the storages point into it
    for (int i = 0; i < device_count(); ++i) {
      all->emplace_back(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(i)));
    }
    return all;
  }();
  c10::OptionalDeviceGuard guard(indexed(device));
  const auto keys = kKeys | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocators->at(current_device()), keys, c10::dtype_or_default(dtype),
                                   std::nullopt);
}

// The CPU's fill_ refuses some dtypes (the bits types, float4) when it dispatches, before it looks at the tensor:
// so does openreg's, at the call, with the CPU's error. Known good dtypes are remembered.
void check_fill_dtype(at::ScalarType dtype, const at::Scalar& value) {
  static std::array<std::atomic<bool>, static_cast<size_t>(at::ScalarType::NumOptions)> fills{};
  auto& known = fills[static_cast<size_t>(dtype)];
  if (known.load(std::memory_order_relaxed)) return;
  at::empty({0}, at::TensorOptions().dtype(dtype)).fill_(value);
  known.store(true, std::memory_order_relaxed);
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  check_fill_dtype(self.scalar_type(), value);
  if (self.numel() == 0) return self;
  HostView v = HostView::written(self);
  launch(self.device().index(), "fill_", {Touch(v.data(), /*write=*/true)}, [v, value] { v.tensor().fill_(value); });
  return self;
}

// ATen's fill_ (Fill.cpp), the CPU's and CUDA's: a value on another device, the CPU's or another openreg one, is
// read (item(), which waits for it); a CPU tensor filled with an openreg value reaches openreg by the value's key.
at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  if (value.device() != self.device()) {
    if (self.device().type() != c10::DeviceType::PrivateUse1) return self.fill_(value.item());
    return fill_scalar(self, value.item());
  }
  if (self.numel() == 0) return self;
  HostView v = HostView::written(self), s = HostView::of(value);
  launch(self.device().index(), "fill_", {Touch(v.data(), /*write=*/true), s.data()},
         [v, s] { v.tensor().fill_(s.tensor()); });
  return self;
}

// As CUDA's: a tensor whose elements fill a span of memory is zeroed byte by byte, whatever its dtype (the bits
// types too); any other is filled with 0.
at::Tensor& zero(at::Tensor& self) {
  if (self.numel() == 0) return self;
  if (!self.is_non_overlapping_and_dense()) return fill_scalar(self, 0);
  HostView v = HostView::written(self);
  const size_t nbytes = static_cast<size_t>(self.numel()) * self.itemsize();
  launch(self.device().index(), "zero_", {Touch(v.data(), /*write=*/true)},
         [v, nbytes] { std::memset(v.tensor().mutable_data_ptr(), 0, nbytes); });
  return self;
}

const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef sym_size,
                         std::optional<c10::MemoryFormat> memory_format) {
  auto size = C10_AS_INTARRAYREF_SLOW(sym_size);
  TORCH_CHECK(memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format", *memory_format);
  auto* impl = self.unsafeGetTensorImpl();
  const size_t old_nbytes = impl->storage().nbytes();
  // As the CPU's resize_: the same sizes keep the strides (an out= view stays a
  // view), and a tensor without elements leaves its storage as it is.
  if (self.sizes() != size) {
    impl->set_sizes_contiguous(size);
    const size_t nbytes =
        at::detail::computeStorageNbytesContiguous(size, impl->dtype().itemsize(), impl->storage_offset());
    if (impl->numel() > 0 && nbytes > old_nbytes) {
      c10::DeviceGuard guard(self.device());
      at::native::resize_bytes_nocuda(impl->storage(), static_cast<int64_t>(nbytes));
    }
  }
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  if (fill_new_memory()) at::native::fill_resize_deterministic_(self, static_cast<int64_t>(old_nbytes));
  return self;
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());  // the empty storage is on self's device, not the current one
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, device_allocator(), true);
  return self.set_(storage, 0, {0}, {});
}

// As the CPU's set_, but a storage too small for the view grows through the
// PrivateUse1 hooks, which copy its bytes in stream order (the CPU's copies
// them with memcpy: queued writes lost, and a fault under strict mode).
at::Tensor& set_storage(at::Tensor& self, c10::Storage source, c10::SymInt offset, c10::SymIntArrayRef size,
                        c10::SymIntArrayRef stride) {
  const auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  const int64_t storage_offset = offset.expect_int();
  at::native::checkSetStorage(self, std::move(source), storage_offset, sizes, C10_AS_INTARRAYREF_SLOW(stride));
  const auto contiguous = c10::contiguous_strides(sizes);
  const auto strides = stride.data() != nullptr ? C10_AS_INTARRAYREF_SLOW(stride) : c10::IntArrayRef(contiguous);
  auto* impl = self.unsafeGetTensorImpl();
  const size_t needed = at::detail::computeStorageNbytes(sizes, strides, impl->dtype().itemsize(), storage_offset);
  if (needed > impl->storage().nbytes()) {
    c10::DeviceGuard guard(self.device());
    at::native::resize_bytes_nocuda(impl->storage(), static_cast<int64_t>(needed));
  }
  impl->set_sizes_and_strides(sizes, strides, storage_offset);
  return self;
}

// The tensor's memory is also used on `stream`: the allocator will not reuse
// it until that stream's work queued so far has run.
void record_stream(at::Tensor& self, c10::Stream stream) {
  device_allocator()->recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &empty);
  m.impl("empty_strided", &empty_strided);
  m.impl("_efficientzerotensor", &efficient_zero_tensor);
  m.impl("fill_.Scalar", &fill_scalar);
  m.impl("fill_.Tensor", &fill_tensor);
  m.impl("zero_", &zero);
  m.impl("view", &at::native::view);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("as_strided_", &at::native::as_strided__symint);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("resize_", &resize);
  m.impl("set_", &set_empty);
  m.impl("set_.source_Storage", &at::native::set_);
  m.impl("set_.source_Storage_storage_offset", &set_storage);
  m.impl("set_.source_Tensor", &at::native::set_tensor_);
  m.impl("record_stream", &record_stream);
}

}  // namespace openreg::glue
