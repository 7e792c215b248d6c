// DDP's timer for openreg (as CudaTimer is CUDA's): the logger's compute and
// communication times are measured with timing events on the device's
// current stream, so DDP reports them (and does not warn that it cannot).
#include <c10/core/DeviceGuard.h>

#include <array>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include "openreg/core/stream.h"
#include "openreg/glue/launch.h"

namespace openreg::eager::distributed {
namespace {

class OpenRegTimer final : public c10d::Timer {
 public:
  explicit OpenRegTimer(c10::Device device) : device_(device) {}

  void record(Timer::Event which) override {
    Timer::record(which);  // the host's timestamp too, as CudaTimer keeps it
    c10::DeviceGuard guard(device_);
    glue::checked([&] { marker(which).record(current_stream(device_.index())); });
  }

  std::optional<int64_t> measureDifference(Timer::Event start, Timer::Event end) override {
    openreg::Event &from = marker(start), &to = marker(end);
    if (!from.recorded() || !to.recorded()) return std::nullopt;
    double ms = glue::checked([&] {
      to.synchronize();
      return from.elapsed_ms(to);
    });
    // A backward with no communication leaves its markers of the iteration before.
    if (ms < 0) return std::nullopt;
    return static_cast<int64_t>(ms * 1e6);
  }

 private:
  openreg::Event& marker(Timer::Event which) { return markers_[static_cast<size_t>(which)]; }

  c10::Device device_;
  std::array<openreg::Event, 5> markers_{openreg::Event(true), openreg::Event(true), openreg::Event(true),
                                         openreg::Event(true), openreg::Event(true)};
};

}  // namespace
}  // namespace openreg::eager::distributed

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, openreg::eager::distributed::OpenRegTimer)
}  // namespace c10d
