// The device allocator torch finds before the glue is loaded
// (torch.accelerator.memory_* ask it first). The glue's allocator replaces it
// in torch's registry as the glue loads; storages made earlier keep this one,
// so it forwards.
#include <c10/core/CachingDeviceAllocator.h>

#include "openreg/lazy/entry.h"

namespace openreg::lazy {
namespace {

constexpr auto kType = c10::DeviceType::PrivateUse1;

struct Allocator final : c10::DeviceAllocator {
  c10::DeviceAllocator& real() const {
    glue();
    auto* impl = dynamic_cast<c10::DeviceAllocator*>(c10::GetAllocator(kType));
    TORCH_INTERNAL_ASSERT(impl != nullptr && impl != this, "openreg's glue loaded but did not register its allocator");
    return *impl;
  }

  c10::DataPtr allocate(size_t n) override { return real().allocate(n); }
  c10::DeleterFnPtr raw_deleter() const override { return real().raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { real().copy_data(dest, src, count); }
  bool initialized() override { return glue_loaded() && real().initialized(); }
  void emptyCache(c10::MempoolId_t pool) override { real().emptyCache(pool); }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override { real().recordStream(ptr, stream); }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex d) override {
    return real().getDeviceStats(d);
  }
  void resetAccumulatedStats(c10::DeviceIndex d) override { real().resetAccumulatedStats(d); }
  void resetPeakStats(c10::DeviceIndex d) override { real().resetPeakStats(d); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex d) override { return real().getMemoryInfo(d); }
};

Allocator g_allocator;

}  // namespace

REGISTER_ALLOCATOR(kType, &g_allocator);

}  // namespace openreg::lazy
