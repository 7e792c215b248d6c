// PrivateUse1 hooks (availability, generators, pinned memory, pointer
// lookups).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>

#include "openreg/core/device.h"
#include "openreg/core/segments.h"
#include "openreg/glue/allocator.h"
#include "openreg/glue/generator.h"
#include "openreg/glue/launch.h"
#include "openreg/lazy/entry.h"

namespace openreg::glue {
namespace {

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override {
    try {
      return device_count() > 0;
    } catch (...) {
      return false;
    }
  }
  void init() const override { checked(mark_initialized); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return is_initialized(); }
  c10::DeviceIndex deviceCount() const override {
    return checked([] { return static_cast<c10::DeviceIndex>(device_count()); });
  }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    checked([&] { set_device(d); });
  }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(current_device()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    return static_cast<c10::DeviceIndex>(checked([&] { return exchange_device(d); }));
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    c10::DeviceIndex device = d < 0 ? static_cast<c10::DeviceIndex>(current_device()) : d;
    checked([&] { check_device(device); });
    return at::make_generator<Generator>(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    int device = device_of(data);
    TORCH_CHECK(device >= 0, "pointer ", data, " is not openreg device memory");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device));
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }

  // Growing a storage (UntypedStorage.resize_, Tensor.resize_) moves it to a
  // new allocation; the old bytes are copied in stream order.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
    auto* impl = storage.unsafeGetStorageImpl();
    c10::DeviceGuard guard(storage.device());
    at::DataPtr fresh = device_allocator()->allocate(newsize);
    size_t keep = std::min(newsize, storage.nbytes());
    if (keep > 0) device_allocator()->copy_data(fresh.get(), storage.data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

// Torch holds libopenreg_lazy's hooks (registered at autoload, or as a
// dependency of this library), which forward here from now on.
const bool g_attached = [] {
  lazy::attach(new Hooks());
  return true;
}();

}  // namespace
}  // namespace openreg::glue
