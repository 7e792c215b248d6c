// The device guard torch finds before the glue is loaded. The glue's guard
// replaces it in torch's registry as the glue loads; objects that looked this
// one up earlier (a torch.Event made first thing) keep it, so it forwards.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "openreg/lazy/entry.h"

namespace openreg::lazy {
namespace {

constexpr auto kType = c10::DeviceType::PrivateUse1;

struct Guard final : c10::impl::DeviceGuardImplInterface {
  const DeviceGuardImplInterface& real() const {
    glue();
    const auto* impl = c10::impl::getDeviceGuardImpl(kType);
    TORCH_INTERNAL_ASSERT(impl != this, "openreg's glue loaded but did not register its device guard");
    return *impl;
  }

  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override { return real().exchangeDevice(d); }
  c10::Device getDevice() const override { return real().getDevice(); }
  void setDevice(c10::Device d) const override { real().setDevice(d); }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    try {
      real().uncheckedSetDevice(d);
    } catch (...) {
    }
  }
  c10::Stream getStream(c10::Device d) const override { return real().getStream(d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return real().getDefaultStream(d); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high) const override {
    return real().getStreamFromGlobalPool(d, high);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override { return real().getNewStream(d, priority); }
  c10::Stream exchangeStream(c10::Stream s) const override { return real().exchangeStream(s); }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return real().deviceCount();
    } catch (...) {
      return 0;  // as the glue's guard: the Python layer reports why
    }
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device,
              const c10::EventFlag flag) const override {
    real().record(event, stream, device, flag);
  }
  void block(void* event, const c10::Stream& stream) const override { real().block(event, stream); }
  bool queryEvent(void* event) const override { return real().queryEvent(event); }
  // An event exists only once the glue made it.
  void destroyEvent(void* event, const c10::DeviceIndex d) const noexcept override {
    if (event != nullptr) c10::impl::getDeviceGuardImpl(kType)->destroyEvent(event, d);
  }
  void synchronizeEvent(void* event) const override { real().synchronizeEvent(event); }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex d) const override {
    return real().elapsedTime(start, end, d);
  }
  bool queryStream(const c10::Stream& stream) const override { return real().queryStream(stream); }
  bool isStreamCapturing(const c10::Stream& stream) const override { return real().isStreamCapturing(stream); }
  void* getStreamNativeHandle(const c10::Stream stream) const override { return real().getStreamNativeHandle(stream); }
  void synchronizeStream(const c10::Stream& stream) const override { real().synchronizeStream(stream); }
  void synchronizeDevice(const c10::DeviceIndex d) const override { real().synchronizeDevice(d); }
  void recordDataPtrOnStream(const c10::DataPtr& ptr, const c10::Stream& stream) const override {
    real().recordDataPtrOnStream(ptr, stream);
  }
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override { return real().getDeviceCapability(d); }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);

}  // namespace openreg::lazy
