#include <chrono>
#include <memory>

#include "openreg/core/error.h"
#include "openreg/core/stream.h"

namespace openreg {

struct EventState {
  Stream* stream;
  uint64_t seq;
  std::chrono::steady_clock::time_point time;
};

void Event::record(Stream& stream) {
  auto state = std::make_shared<EventState>(EventState{&stream, 0, {}});
  bool timing = timing_;
  state->seq = stream.launch("event record", [raw = state.get(), timing, keep = state] {
    if (timing) raw->time = std::chrono::steady_clock::now();
  });
  state_ = std::move(state);
}

void Event::block(Stream& stream) const {
  if (!state_ || state_->stream == &stream) return;  // same stream: already ordered
  stream.launch("event wait", [state = state_] { state->stream->wait_for(state->seq); });
}

bool Event::query() const { return !state_ || state_->stream->reached(state_->seq); }

void Event::synchronize() const {
  if (!state_) return;
  state_->stream->wait_for(state_->seq);
  raise_pending_error(state_->stream->device());
}

int Event::device() const { return state_ ? state_->stream->device() : -1; }

double Event::elapsed_ms(const Event& end) const {
  if (!timing_ || !end.timing_) {
    throw Error("elapsed_time needs both events created with enable_timing=True");
  }
  if (!state_ || !end.state_) {
    throw Error("elapsed_time needs both events to be recorded first: call event.record() on each");
  }
  if (!query() || !end.query()) {
    throw Error("elapsed_time needs both events to have completed: call end_event.synchronize() first");
  }
  return std::chrono::duration<double, std::milli>(end.state_->time - state_->time).count();
}

}  // namespace openreg
