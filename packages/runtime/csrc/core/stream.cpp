#include "openreg/core/stream.h"

#include <array>
#include <string>
#include <vector>

#include "openreg/core/device.h"
#include "openreg/core/error.h"

namespace openreg {

struct EventState {
  Stream* stream;
  uint64_t seq;
  std::chrono::steady_clock::time_point time;
};

namespace {

constexpr int kStreams = kPoolSize + 1;
// A short spin before sleeping keeps launch-to-run and finish-to-wake latency
// low (a futex wake costs microseconds) without holding a core when idle.
constexpr auto kSpin = std::chrono::microseconds(50);

template <typename Pred>
bool spin_until(Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      __builtin_ia32_pause();
    }
    if (std::chrono::steady_clock::now() > deadline) return done();
  }
}

struct DeviceState {
  std::array<std::atomic<Stream*>, kStreams> streams{};
  std::atomic<int> next_pool{0};
  std::mutex error_mu;
  std::string error;  // first failure not yet raised
};

std::vector<DeviceState>& devices() {
  // Never destroyed: worker threads may still run while the process exits.
  static auto* states = new std::vector<DeviceState>(device_count());
  return *states;
}

std::mutex g_create_mu;
thread_local std::array<int8_t, 64> t_current_stream{};

void record_failure(int device, int stream, const char* name, const char* what) {
  auto& d = devices()[device];
  std::lock_guard<std::mutex> lock(d.error_mu);
  if (d.error.empty()) {
    d.error = std::string("openreg: '") + name + "' failed asynchronously on openreg:" + std::to_string(device) +
              " (stream " + std::to_string(stream) + "): " + what;
  }
}

}  // namespace

uint64_t Stream::launch(const char* name, Task task) {
  check_not_forked();
  uint64_t seq;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!worker_.joinable()) {
      mark_initialized();
      worker_ = std::thread([this] { run(); });
    }
    queue_.push_back({name, std::move(task)});
    seq = enqueued_.fetch_add(1, std::memory_order_acq_rel) + 1;
    wake = worker_sleeping_;
  }
  if (wake) work_cv_.notify_one();
  if (config().launch_blocking) synchronize();
  return seq;
}

void Stream::run() {
  for (;;) {
    Item item;
    spin_until([this] { return !query(); });
    {
      std::unique_lock<std::mutex> lock(mu_);
      worker_sleeping_ = true;
      work_cv_.wait(lock, [this] { return !queue_.empty(); });
      worker_sleeping_ = false;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      item.task();
    } catch (const std::exception& e) {
      record_failure(device_, id_, item.name, e.what());
    } catch (...) {
      record_failure(device_, id_, item.name, "unknown exception");
    }
    item.task = nullptr;  // release captured buffers before reporting completion
    bool notify;
    {
      std::lock_guard<std::mutex> lock(mu_);
      completed_.fetch_add(1, std::memory_order_acq_rel);
      notify = host_waiters_ > 0;
    }
    if (notify) done_cv_.notify_all();
  }
}

void Stream::wait_for(uint64_t seq) {
  if (spin_until([&] { return reached(seq); })) return;
  std::unique_lock<std::mutex> lock(mu_);
  ++host_waiters_;
  done_cv_.wait(lock, [&] { return reached(seq); });
  --host_waiters_;
}

void Stream::synchronize() {
  check_not_forked();
  wait_for(last());
  raise_pending_error(device_);
}

Stream& get_stream(int device, int id) {
  check_device(device);
  if (id < 0 || id >= kStreams) {
    throw Error("openreg stream id " + std::to_string(id) + " does not exist: valid ids are 0 to " +
                std::to_string(kStreams - 1));
  }
  auto& slot = devices()[device].streams[id];
  Stream* s = slot.load(std::memory_order_acquire);
  if (s == nullptr) {
    std::lock_guard<std::mutex> lock(g_create_mu);
    s = slot.load(std::memory_order_relaxed);
    if (s == nullptr) {
      s = new Stream(device, id);  // lives as long as the process
      slot.store(s, std::memory_order_release);
    }
  }
  return *s;
}

int next_pool_stream(int device) {
  check_device(device);
  return 1 + devices()[device].next_pool.fetch_add(1) % kPoolSize;
}

Stream& current_stream(int device) { return get_stream(device, t_current_stream[device]); }

void set_current_stream(int device, int id) {
  get_stream(device, id);  // validates both
  t_current_stream[device] = static_cast<int8_t>(id);
}

void raise_pending_error(int device) {
  auto& d = devices()[device];
  std::string error;
  {
    std::lock_guard<std::mutex> lock(d.error_mu);
    error.swap(d.error);
  }
  if (!error.empty()) throw Error(error);
}

void synchronize_device(int device) {
  check_not_forked();
  int first = device < 0 ? 0 : device;
  int end = device < 0 ? device_count() : device + 1;
  for (int dev = first; dev < end; ++dev) {
    check_device(dev);
    for (auto& slot : devices()[dev].streams) {
      if (Stream* s = slot.load(std::memory_order_acquire)) s->wait_for(s->last());
    }
  }
  for (int dev = first; dev < end; ++dev) raise_pending_error(dev);
}

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
