#include "openreg/core/detail/host_idle.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "openreg/core/stream.h"

namespace openreg {
namespace {

// Host threads inside Stream::wait_for, of any stream.
std::atomic<int> g_waiting{0};
// How long a task that nothing follows waits to see the host wait or launch.
constexpr auto kIdleWatch = std::chrono::microseconds(200);

}  // namespace

detail::HostWaiting::HostWaiting() { g_waiting.fetch_add(1, std::memory_order_relaxed); }
detail::HostWaiting::~HostWaiting() { g_waiting.fetch_sub(1, std::memory_order_relaxed); }

bool HostIdle::operator()() const {
  auto waiting = [] { return g_waiting.load(std::memory_order_relaxed) > 0; };
  // `y = a @ b; y.item()` launches a task just before the host waits for it: when
  // nothing follows a task, watch the host for a moment (giving it this core)
  // until it waits (the task gets every core) or launches more (it is running).
  const auto deadline = std::chrono::steady_clock::now() + kIdleWatch;
  while (!waiting() && task_.next.load(std::memory_order_acquire) == nullptr &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  return waiting();
}

}  // namespace openreg
