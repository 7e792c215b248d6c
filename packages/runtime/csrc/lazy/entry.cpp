// Loading the glue on first use, and the PrivateUse1 hooks that forward to it.
#include "openreg/lazy/entry.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>

namespace openreg::lazy {
namespace {

std::atomic<const at::PrivateUse1HooksInterface*> g_glue{nullptr};

// Beside this library: both are in the runtime's lib/ folder.
std::string glue_path() {
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&glue_path), &info);
  std::string self = info.dli_fname ? info.dli_fname : "";
  return self.substr(0, self.find_last_of('/') + 1) + "libopenreg_glue.so";
}

struct Hooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override {
    try {
      return glue().isAvailable();
    } catch (...) {
      return false;
    }
  }
  void init() const override { glue().init(); }
  // Asked on CPU-only paths (autograd, is_pinned): nothing to load for a "no".
  bool hasPrimaryContext(c10::DeviceIndex d) const override { return glue_loaded() && glue().hasPrimaryContext(d); }
  bool isPinnedPtr(const void* data) const override { return glue_loaded() && glue().isPinnedPtr(data); }

  c10::DeviceIndex deviceCount() const override { return glue().deviceCount(); }
  void setCurrentDevice(c10::DeviceIndex d) const override { glue().setCurrentDevice(d); }
  c10::DeviceIndex getCurrentDevice() const override { return glue().getCurrentDevice(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override { return glue().exchangeDevice(d); }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return glue().maybeExchangeDevice(d); }
  at::Allocator* getPinnedMemoryAllocator() const override { return glue().getPinnedMemoryAllocator(); }
  at::Device getDeviceFromPtr(void* data) const override { return glue().getDeviceFromPtr(data); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return glue().getDefaultGenerator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override { return glue().getNewGenerator(d); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    glue().resizePrivateUse1Bytes(storage, newsize);
  }
};

[[maybe_unused]] const bool g_registered = registered();

}  // namespace

bool registered() {
  // Another PrivateUse1 backend may have registered first: torch then refuses
  // ours, and the device is unavailable (the Python layer says why).
  static const bool ours = [] {
    if (at::isPrivateUse1HooksRegistered()) return false;
    at::RegisterPrivateUse1HooksInterface(new Hooks());
    return true;
  }();
  return ours;
}

void attach(const at::PrivateUse1HooksInterface* hooks) { g_glue.store(hooks, std::memory_order_release); }

bool glue_loaded() { return g_glue.load(std::memory_order_acquire) != nullptr; }

const at::PrivateUse1HooksInterface& glue() {
  if (const auto* hooks = g_glue.load(std::memory_order_acquire)) return *hooks;
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    // The handle is kept for the life of the process, as the glue's registrations are.
    if (dlopen(glue_path().c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) error = dlerror();
  });
  const auto* hooks = g_glue.load(std::memory_order_acquire);
  TORCH_CHECK(hooks != nullptr, "the openreg device cannot start: its runtime library ", glue_path(), " did not load (",
              error.empty() ? "it did not register" : error,
              "). Fix: reinstall it: pip install --force-reinstall --no-deps openreg-runtime");
  return *hooks;
}

}  // namespace openreg::lazy
