// Profiler methods registered at autoload, so that a profiler started with
// use_device="openreg" before the device was touched finds openreg's: the
// first call loads the glue, whose methods replace these, and is forwarded.
#include <torch/csrc/profiler/stubs/base.h>

#include "openreg/lazy/entry.h"

namespace openreg::lazy {
namespace {

using torch::profiler::impl::ProfilerStubs;
using torch::profiler::impl::ProfilerVoidEventStub;

struct Forwarding final : ProfilerStubs {
  const ProfilerStubs& real() const {
    glue();
    const ProfilerStubs* loaded = torch::profiler::impl::privateuse1Stubs();
    TORCH_CHECK(loaded != this,
                "openreg's runtime library loaded without its profiler methods. Fix: reinstall it: "
                "pip install --force-reinstall --no-deps openreg-runtime");
    return *loaded;
  }
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    real().record(device, event, cpu_ns);
  }
  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    return real().elapsed(start, end);
  }
  void mark(const char* name) const override { real().mark(name); }
  void rangePush(const char* name) const override { real().rangePush(name); }
  void rangePop() const override { real().rangePop(); }
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override { real().onEachDevice(std::move(op)); }
  void synchronize() const override { real().synchronize(); }
};

// Torch's default methods say they are not enabled; another backend's are left alone.
[[maybe_unused]] const bool g_registered = [] {
  if (torch::profiler::impl::privateuse1Stubs()->enabled()) return false;
  static Forwarding methods;
  torch::profiler::impl::registerPrivateUse1Methods(&methods);
  return true;
}();

}  // namespace
}  // namespace openreg::lazy
