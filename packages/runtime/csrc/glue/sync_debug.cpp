#include "openreg/glue/sync_debug.h"

#include <c10/util/Exception.h>

#include <atomic>

#include "openreg/core/stream.h"

namespace openreg::glue {
namespace {

std::atomic<SyncDebugMode> g_mode{SyncDebugMode::kDefault};

}  // namespace

void set_sync_debug_mode(SyncDebugMode mode) { g_mode.store(mode, std::memory_order_relaxed); }

SyncDebugMode sync_debug_mode() { return g_mode.load(std::memory_order_relaxed); }

void on_host_sync(const char* call) {
  SyncDebugMode mode = sync_debug_mode();
  if (mode == SyncDebugMode::kDefault || in_task()) return;  // a task's own calls do not block the host
  constexpr const char* kWhy =
      ": it blocks the host until the device has run the work queued before it. Keep the value on the device, or "
      "take the call out of the loop; torch.openreg.set_sync_debug_mode(\"default\") turns this report off.";
  if (mode == SyncDebugMode::kError) TORCH_CHECK(false, "called a synchronizing openreg operation, ", call, kWhy);
  TORCH_WARN("called a synchronizing openreg operation, ", call, kWhy);
}

}  // namespace openreg::glue
