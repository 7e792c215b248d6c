#pragma once
// torch.openreg.set_sync_debug_mode, as torch.cuda's: every call that blocks
// the host on the device (a blocking copy, .item(), an op whose result's
// shape depends on values) warns or raises, naming the call; synchronize()
// and event/stream waits are exempt, as CUDA exempts them.

namespace openreg::glue {

enum class SyncDebugMode : int { kDefault = 0, kWarn = 1, kError = 2 };

void set_sync_debug_mode(SyncDebugMode mode);
SyncDebugMode sync_debug_mode();

// Called by each call that blocks the host on the device, before it waits:
// warns (a Python UserWarning at the caller's line) or raises per the mode.
void on_host_sync(const char* call);

}  // namespace openreg::glue
