// The PrivateUse1 device guard: device and stream switching, and events, for
// c10::DeviceGuard, torch.Stream, torch.Event and torch.accelerator.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "openreg/core/device.h"
#include "openreg/core/graph.h"
#include "openreg/core/stream.h"
#include "openreg/glue/allocator.h"
#include "openreg/glue/launch.h"

namespace openreg::glue {
namespace {

constexpr auto kType = c10::DeviceType::PrivateUse1;

c10::Stream make_stream(c10::DeviceIndex device, int id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, device), id);
}

Event* as_event(void* e) { return static_cast<Event*>(e); }

// c10 passes index -1 for "the current device" (torch.Stream(device="openreg")).
c10::DeviceIndex index(c10::Device d) {
  return d.has_index() ? d.index() : static_cast<c10::DeviceIndex>(current_device());
}

struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    int previous = checked([&] { return exchange_device(d.index()); });
    return c10::Device(kType, static_cast<c10::DeviceIndex>(previous));
  }
  c10::Device getDevice() const override { return c10::Device(kType, static_cast<c10::DeviceIndex>(current_device())); }
  void setDevice(c10::Device d) const override {
    checked([&] { set_device(d.index()); });
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      set_device(d.index());
    } catch (...) {
    }
  }

  c10::Stream getStream(c10::Device d) const override { return current_stream(index(d)); }
  c10::Stream getDefaultStream(c10::Device d) const override { return make_stream(index(d), 0); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority = false) const override {
    return getNewStream(d, high_priority ? 1 - kPriorities : 0);
  }
  c10::Stream getNewStream(c10::Device d, int priority = 0) const override {
    return make_stream(index(d), checked([&] { return next_pool_stream(index(d), priority); }));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream previous = current_stream(s.device_index());
    checked([&] { set_current_stream(s.device_index(), static_cast<int>(s.id())); });
    return previous;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(device_count());
    } catch (...) {
      return 0;  // a bad OPENREG_DEVICE_COUNT is reported by the Python layer
    }
  }

  // PYTORCH_DEFAULT events do no timing, like CUDA's cudaEventDisableTiming.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device == -1 || device == stream.device_index(), "Event on openreg:", device,
                " cannot be recorded on a stream of openreg:", stream.device_index());
    if (*event == nullptr) *event = new Event(flag == c10::EventFlag::BACKEND_DEFAULT);
    checked([&] { as_event(*event)->record(core_stream(stream)); });
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event != nullptr) checked([&] { as_event(event)->block(core_stream(stream)); });
  }
  // Querying captured work is an error, as cudaEventQuery and cudaStreamQuery
  // make it (and, in "global" mode, querying anything from another thread).
  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    return checked([&] {
      check_may_wait(as_event(event)->stream(), "Event.query()");
      return as_event(event)->query();
    });
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override { delete as_event(event); }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) checked([&] { as_event(event)->synchronize(); });
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "elapsed_time needs both events to be recorded first: call event.record() on each");
    return checked([&] { return as_event(start)->elapsed_ms(*as_event(end)); });
  }

  bool queryStream(const c10::Stream& stream) const override {
    return checked([&] {
      check_may_wait(&core_stream(stream), "Stream.query()");
      return core_stream(stream).query();
    });
  }
  // torch.Stream.is_capturing(), which torch.optim's capturable check and torch.accelerator's callers read.
  // The core stream itself: opaque, and the same for the same stream (CUDA's is the cudaStream_t).
  void* getStreamNativeHandle(const c10::Stream stream) const override {
    return checked([&] { return static_cast<void*>(&core_stream(stream)); });
  }
  bool isStreamCapturing(const c10::Stream& stream) const override {
    return checked([&] { return is_capturing(core_stream(stream)); });
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    checked([&] { core_stream(stream).synchronize(); });
  }
  void synchronizeDevice(const c10::DeviceIndex device) const override {
    // One device (-1: the current one); the core's "every device" is not for torch's callers.
    const int d = device == -1 ? current_device() : device;
    checked([&] {
      check_device(d);
      synchronize_device(d);
    });
  }
  void recordDataPtrOnStream(const c10::DataPtr& ptr, const c10::Stream& stream) const override {
    device_allocator()->recordStream(ptr, stream);
  }
  // The dtypes whose tensors openreg holds and converts to each other (CUDA's,
  // float8, the wide unsigned ones), as the capability promises (torch 2.13's
  // CUDA guard does not answer at all), and the quantized ones where a layer
  // makes such tensors (openreg-eager: quantize_per_tensor, dequantize). Bit
  // and sub-byte dtypes are held, but convert to nothing.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    checked([&] { check_device(index(d)); });
    c10::DeviceCapability capability;
    capability.capability_data.capability_bits = 0;
    auto& has = capability.capability_data.supported_scalar_types;
    has.has_Byte = has.has_Char = has.has_Short = has.has_Int = has.has_Long = has.has_Bool = 1;
    has.has_UInt16 = has.has_UInt32 = has.has_UInt64 = 1;
    has.has_Half = has.has_BFloat16 = has.has_Float = has.has_Double = 1;
    has.has_ComplexHalf = has.has_ComplexFloat = has.has_ComplexDouble = 1;
    has.has_Float8_e5m2 = has.has_Float8_e4m3fn = has.has_Float8_e5m2fnuz = has.has_Float8_e4m3fnuz = 1;
    has.has_Float8_e8m0fnu = 1;
    const auto quantized = c10::Dispatcher::singleton().findOp({"aten::_empty_affine_quantized", ""});
    if (quantized && quantized->hasKernelForDispatchKey(c10::DispatchKey::QuantizedPrivateUse1)) {
      has.has_QInt8 = has.has_QUInt8 = has.has_QInt32 = has.has_QUInt4x2 = has.has_QUInt2x4 = 1;
    }
    return capability;
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

}  // namespace openreg::glue
