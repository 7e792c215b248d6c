// The Kineto profiler torch.profiler finds for PrivateUse1 from `import torch`
// on: Kineto collects its profilers once, when the first profile starts, which
// may be before the device is touched. A profile that asks for device
// activities loads the glue, whose profiler this one forwards to; a CPU-only
// profile loads nothing.
#ifdef USE_KINETO
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <atomic>

#include "openreg/lazy/entry.h"

namespace openreg::lazy {
namespace {

std::atomic<libkineto::IActivityProfiler*> g_real{nullptr};

libkineto::IActivityProfiler& real() {
  glue();
  auto* loaded = g_real.load(std::memory_order_acquire);
  TORCH_CHECK(loaded != nullptr,
              "openreg's runtime library loaded without its profiler. Fix: reinstall it: "
              "pip install --force-reinstall --no-deps openreg-runtime");
  return *loaded;
}

struct Forwarding final : libkineto::IActivityProfiler {
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    if (!types.contains(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return real().configure(types, config);
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t ts_ms, int64_t duration_ms,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    if (!types.contains(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return real().configure(ts_ms, duration_ms, types, config);
  }

 private:
  std::string name_{"openreg"};
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL,
                                                libkineto::ActivityType::GPU_MEMCPY,
                                                libkineto::ActivityType::PRIVATEUSE1_RUNTIME};
};

// Another PrivateUse1 backend's profiler is left alone.
[[maybe_unused]] const bool g_registered = [] {
  auto& registry = torch::profiler::impl::PrivateUse1ProfilerRegistry::instance();
  if (registry.hasFactory()) return false;
  registry.registerFactory([] { return std::make_unique<Forwarding>(); });
  return true;
}();

}  // namespace

void attach_profiler(libkineto::IActivityProfiler* profiler) { g_real.store(profiler, std::memory_order_release); }

}  // namespace openreg::lazy
#endif  // USE_KINETO
