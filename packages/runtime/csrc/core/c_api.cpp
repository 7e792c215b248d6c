#include "openreg/core/c_api.h"

#include <cstdio>
#include <memory>
#include <vector>

#include "openreg/core/device.h"
#include "openreg/core/segments.h"
#include "openreg/core/stream.h"
#include "openreg/core/strict.h"

extern "C" int openreg_launch_host_fn(const char* name, void (*fn)(void*), void* ctx, void (*drop)(void*),
                                      const void* const* ptrs, std::size_t n, int flags, char* err,
                                      std::size_t errlen) {
  try {
    // Drops ctx with the task.
    std::unique_ptr<void, void (*)(void*)> owned(ctx, drop ? drop : +[](void*) {});
    std::vector<openreg::Touch> touches(ptrs, ptrs + n);
    // The device whose memory the kernel works on (graphs on openreg:1 run there), else the current one.
    int device = -1;
    for (std::size_t i = 0; i < n && device < 0; ++i) device = ptrs[i] ? openreg::device_of(ptrs[i]) : -1;
    if (device < 0) device = openreg::current_device();
    auto& stream = openreg::current_stream(device);
    // Compiled kernels name their pointers, not which they write: the stream sanitizer takes them as reads.
    const openreg::Touch* checked = touches.data();  // the buffer moves into the task with the vector
    const uint64_t seq = stream.launch(
        name,
        [fn, owned = std::move(owned), touches = std::move(touches)] {
          openreg::HostAccess access(touches.data(), touches.size());
          fn(owned.get());
        },
        checked, n);
    if (flags & OPENREG_LAUNCH_WAIT) {
      stream.wait_for(seq);
      openreg::raise_pending_error(device);
    }
    return 0;
  } catch (const std::exception& e) {
    if (err && errlen) std::snprintf(err, errlen, "%s", e.what());
    return -1;
  }
}

extern "C" int openreg_exchange_device(int device) {
  const int previous = openreg::current_device();
  if (device >= 0 && device != previous) openreg::set_device(device);
  return previous;
}
