// The PrivateUse1 profiler methods: what torch.autograd.profiler.profile(
// use_device="openreg") records around every op, as CUDA's methods do with
// CUDA events. Device time is measured with openreg's timed events on the
// current stream; openreg has no range annotations (NVTX's part), so marks
// and ranges record nothing.
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "openreg/core/device.h"
#include "openreg/core/stream.h"
#include "openreg/glue/launch.h"

namespace openreg::glue {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

const Event& as_event(const ProfilerVoidEventStub* stub) { return *static_cast<const Event*>(stub->get()); }

struct ProfilerMethods final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    checked([&] {
      const int current = current_device();
      if (device != nullptr) *device = static_cast<c10::DeviceIndex>(current);
      auto* recorded = new Event(/*timing=*/true);
      *event = std::shared_ptr<void>(recorded, [](void* e) { delete static_cast<Event*>(e); });
      recorded->record(openreg::current_stream(current));
    });
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
  }
  // In microseconds, as CUDA's methods report.
  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    return checked([&] {
      as_event(start).synchronize();
      as_event(end).synchronize();
      return static_cast<float>(as_event(start).elapsed_ms(as_event(end)) * 1000.0);
    });
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    const int previous = current_device();
    for (int d = 0; d < device_count(); ++d) {
      checked([&] { set_device(d); });
      op(d);
    }
    checked([&] { set_device(previous); });
  }
  void synchronize() const override {
    checked([&] { synchronize_device(-1); });
  }
};

// Replaces the forwarding methods libopenreg_lazy registered at autoload.
const bool g_registered = [] {
  static ProfilerMethods methods;
  torch::profiler::impl::registerPrivateUse1Methods(&methods);
  return true;
}();

}  // namespace
}  // namespace openreg::glue
