#include <chrono>
#include <memory>
#include <string>

#include "openreg/core/detail/capture.h"
#include "openreg/core/error.h"
#include "openreg/core/sanitizer.h"
#include "openreg/core/stream.h"

namespace openreg {

struct EventState {
  Stream* stream;
  uint64_t seq;
  std::chrono::steady_clock::time_point time;
  std::weak_ptr<detail::Capture> capture;         // the capture that recorded it, if one did
  uint64_t capture_mark = 0;                      // the captured work it follows (Capture::mark)
  std::shared_ptr<const sanitizer::Clock> clock;  // its stream's, for the stream sanitizer
};

void Event::record(Stream& stream) {
  auto state = std::make_shared<EventState>(EventState{&stream, 0, {}});
  auto stamp = [raw = state.get(), timing = timing_] {
    if (timing) raw->time = std::chrono::steady_clock::now();
  };
  detail::Capture* capture = stream.capture();
  // On a stream that has run all its work the event is complete now, as a GPU's would be a moment later;
  // queueing it instead would leave query() False until the worker woke.
  if (const uint64_t last = stream.last(); capture == nullptr && stream.reached(last)) {
    state->seq = last;
    stamp();
  } else {
    state->seq = stream.launch("event record", [stamp, keep = state] { stamp(); });
  }
  if (capture != nullptr) {
    state->capture = capture->shared_from_this();
    state->capture_mark = capture->mark(stream);
  } else if (sanitizer::on()) {
    state->clock = sanitizer::clock_of(stream);
  }
  state_ = std::move(state);
}

void Event::block(Stream& stream) const {
  if (!state_ || state_->stream == &stream) return;  // same stream: already ordered
  if (auto capture = state_->capture.lock(); capture && capture->has(*state_->stream)) {
    capture->wait(stream, state_->capture_mark);
    return;
  }
  if (detail::Capture* capture = stream.capture()) {
    const std::string why = "openreg: a stream capturing a graph (openreg:" + std::to_string(stream.device()) +
                            " stream " + std::to_string(stream.id()) +
                            ") cannot wait for an event recorded outside the capture: its replays would not "
                            "wait for it. Record the event inside the capture, or wait before capture_begin()";
    capture->fail(why);
    throw Error(why);
  }
  if (state_->clock) sanitizer::stream_waits(stream, *state_->clock);
  if (state_->stream->reached(state_->seq)) return;  // nothing left to wait for
  stream.launch("event wait", [state = state_] { state->stream->wait_for(state->seq); });
}

bool Event::query() const {
  if (!state_) return true;
  if (!state_->stream->reached(state_->seq)) return false;
  if (state_->clock && !in_task()) sanitizer::host_waits(*state_->clock);
  return true;
}

void Event::synchronize() const {
  if (!state_) return;
  state_->stream->wait_for(state_->seq);
  if (state_->clock && !in_task()) sanitizer::host_waits(*state_->clock);
  raise_pending_error(state_->stream->device());
}

int Event::device() const { return state_ ? state_->stream->device() : -1; }

const Stream* Event::stream() const { return state_ ? state_->stream : nullptr; }

double Event::elapsed_ms(const Event& end) const {
  if (!timing_ || !end.timing_) {
    throw Error("elapsed_time needs both events created with enable_timing=True");
  }
  if (!state_ || !end.state_) {
    throw Error("elapsed_time needs both events to be recorded first: call event.record() on each");
  }
  if (device() != end.device()) {  // as CUDA's: devices keep clocks of their own
    throw Error("elapsed_time needs both events recorded on one device, got events on openreg:" +
                std::to_string(device()) + " and openreg:" + std::to_string(end.device()) +
                ": time each device's work with events recorded on its own streams");
  }
  if (!query() || !end.query()) {
    throw Error("elapsed_time needs both events to have completed: call end_event.synchronize() first");
  }
  return std::chrono::duration<double, std::milli>(end.state_->time - state_->time).count();
}

}  // namespace openreg
