#pragma once
// What HostIdle (stream.h) watches for: a host thread waiting for the device.

namespace openreg::detail {

// Held by a host thread while it waits for a stream: a waiting thread leaves
// its core to the kernels.
class HostWaiting {
 public:
  HostWaiting();
  ~HostWaiting();
  HostWaiting(const HostWaiting&) = delete;
  HostWaiting& operator=(const HostWaiting&) = delete;
};

}  // namespace openreg::detail
