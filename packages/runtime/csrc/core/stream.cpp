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
// A worker that falls asleep looks for work once more after this long (see next_task()).
constexpr auto kRecheck = std::chrono::microseconds(500);
// Launches between two clean-ups of finished tasks (waits always clean up).
constexpr uint64_t kDestroyBatch = 32;

// malloc hands the memory of tasks just destroyed to the next launches (its
// per-thread caches are last in, first out). The worker has read those cache
// lines, so each write of a launch there would wait for the worker's core to
// give its copy up: asking for them now, for writing, does that in the
// background. A hint only: the memory is not touched.
void claim_lines(const void* p, uint32_t bytes) {
  for (uint32_t at = 0; at < bytes; at += 64) {
#if defined(__x86_64__)
    asm volatile("prefetchw (%0)" : : "r"(static_cast<const char*>(p) + at));
#else
    __builtin_prefetch(static_cast<const char*>(p) + at, 1);
#endif
  }
}

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

struct SpinLock {
  explicit SpinLock(std::atomic_flag& flag) : flag_(flag) {
    while (flag_.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
  }
  ~SpinLock() { flag_.clear(std::memory_order_release); }
  std::atomic_flag& flag_;
};

struct DeviceState {
  std::array<std::atomic<Stream*>, kStreams> streams{};
  std::atomic<int> next_pool{0};
  std::mutex error_mu;
  std::string error;  // first failure not yet raised
  std::exception_ptr cause;  // what that task threw
};

std::vector<DeviceState>& devices() {
  // Never destroyed: worker threads may still run while the process exits.
  static auto* states = new std::vector<DeviceState>(device_count());
  return *states;
}

std::mutex g_create_mu;
std::atomic<TaskHook> g_task_hook{nullptr};
// Threads inside Stream::wait_for, of any stream: a waiting thread leaves its core to the kernels.
std::atomic<int> g_waiting{0};
// How long a task that nothing follows waits to see the host wait or launch (see HostIdle).
constexpr auto kIdleWatch = std::chrono::microseconds(200);
thread_local std::array<int8_t, 64> t_current_stream{};
thread_local const Stream* t_worker_of = nullptr;  // the stream whose worker this thread is

void record_failure(int device, int stream, const char* name, const char* what, std::exception_ptr cause) {
  auto& d = devices()[device];
  std::lock_guard<std::mutex> lock(d.error_mu);
  if (d.error.empty()) {
    d.error = std::string("openreg: '") + name + "' failed asynchronously on openreg:" + std::to_string(device) +
              " (stream " + std::to_string(stream) + "): " + what;
    d.cause = std::move(cause);
  }
}

}  // namespace

Stream::Node* Stream::pop() {
  Node* next = front_->next.load(std::memory_order_acquire);
  if (next != nullptr) front_ = next;
  return next;
}

uint64_t Stream::launch(const char* name, Task task) {
  check_not_forked();
  task.node_->name = name;
  uint64_t seq;
  {
    SpinLock lock(launching_);
    if (!worker_.joinable()) {
      mark_initialized();
      worker_ = std::thread([this] { run(); });
    }
    // Numbered and queued under one lock, so sequence numbers follow queue order.
    seq = enqueued_.load(std::memory_order_relaxed) + 1;
    Node* node = task.node_.release();  // the worker's now
    node->seq = seq;
    last_->next.store(node, std::memory_order_release);
    last_ = node;
    enqueued_.store(seq, std::memory_order_release);
  }
  // In batches: the list's cache line moves between the cores at every look.
  if (seq % kDestroyBatch == 0) destroy_finished();
  // No fence before this look (see next_task()): a fence would make every
  // launch wait for the task's link to reach the worker's core.
  if (worker_sleeping_.load(std::memory_order_relaxed)) {
    { std::lock_guard<std::mutex> lock(mu_); }
    work_cv_.notify_one();
  }
  if (config().launch_blocking) synchronize();
  return seq;
}

Stream::Node* Stream::next_task() {
  Node* node = nullptr;
  if (spin_until([&] { return (node = pop()) != nullptr; })) return node;
  std::unique_lock<std::mutex> lock(mu_);
  worker_sleeping_.store(true, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // A launch that raced with falling asleep may have missed the flag (launchers
  // look without a fence) while its task was not yet visible here: it is
  // visible long before kRecheck, so the first sleep is bounded by it.
  if (!work_cv_.wait_for(lock, kRecheck, [&] { return (node = pop()) != nullptr; })) {
    work_cv_.wait(lock, [&] { return (node = pop()) != nullptr; });
  }
  worker_sleeping_.store(false, std::memory_order_relaxed);
  return node;
}

void Stream::run() {
  t_worker_of = this;
  for (;;) {
    Node* node = next_task();
    if (TaskHook hook = g_task_hook.load(std::memory_order_acquire)) hook(HostIdle(*node));
    try {
      node->run();
    } catch (const std::exception& e) {
      record_failure(device_, id_, node->name, e.what(), std::current_exception());
    } catch (...) {
      record_failure(device_, id_, node->name, "unknown exception", std::current_exception());
    }
    const uint64_t done = completed_.fetch_add(1, std::memory_order_seq_cst) + 1;
    // A futex wake per task would wake a waiting host for nothing, on cores the kernels need.
    if (host_waiters_.load(std::memory_order_seq_cst) > 0 && done >= wake_at_.load(std::memory_order_seq_cst)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        wake_at_.store(UINT64_MAX, std::memory_order_relaxed);
      }
      done_cv_.notify_all();
    }
  }
}

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

void Stream::destroy_finished() {
  Node* first;
  Node* end;
  {
    SpinLock lock(launching_);
    // The worker is done with a node once its successor has run: it has moved past it.
    const uint64_t done = completed_.load(std::memory_order_acquire);
    first = end = oldest_;
    while (end != last_ && end->seq < done) end = end->next.load(std::memory_order_relaxed);
    oldest_ = end;
  }
  // Outside the lock: what a task captured may launch work as it goes (a freed block's events).
  while (first != end) {
    Node* next = first->next.load(std::memory_order_relaxed);
    if (first != &stub_) {
      const uint32_t bytes = first->bytes;
      delete first;
      claim_lines(first, bytes);
    }
    first = next;
  }
}

void Stream::wait_for(uint64_t seq) {
  // A task on this stream: what came before it has run, and what follows cannot run until it ends.
  if (t_worker_of == this) return;
  struct Waiting {
    Waiting() { g_waiting.fetch_add(1, std::memory_order_relaxed); }
    ~Waiting() { g_waiting.fetch_sub(1, std::memory_order_relaxed); }
  } waiting;
  if (!spin_until([&] { return reached(seq); })) {
    std::unique_lock<std::mutex> lock(mu_);
    host_waiters_.fetch_add(1, std::memory_order_seq_cst);
    while (!reached(seq)) {
      // Published under mu_, so waiters keep the minimum; the worker clears it when it wakes them.
      if (seq < wake_at_.load(std::memory_order_relaxed)) wake_at_.store(seq, std::memory_order_seq_cst);
      // Pairs with the worker's check after completing a task: either it sees wake_at_, or we see its progress.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (reached(seq)) break;
      done_cv_.wait(lock);
    }
    host_waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  destroy_finished();
  release_last();
}

void Stream::release_last() {
  SpinLock lock(launching_);  // last_ cannot change meanwhile, nor leave the list (nothing follows it)
  if (last_ != &stub_ && reached(last_->seq)) last_->release();
}

void Stream::synchronize() {
  check_not_forked();
  wait_for(last());
  raise_pending_error(device_);
}

void set_task_hook(TaskHook hook) { g_task_hook.store(hook, std::memory_order_release); }

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

Stream& current_stream(int device) {
  check_device(device);  // before it indexes the table
  return get_stream(device, t_current_stream[device]);
}

void set_current_stream(int device, int id) {
  get_stream(device, id);  // validates both
  t_current_stream[device] = static_cast<int8_t>(id);
}

void raise_pending_error(int device) {
  auto& d = devices()[device];
  std::string error;
  std::exception_ptr cause;
  {
    std::lock_guard<std::mutex> lock(d.error_mu);
    error.swap(d.error);
    cause.swap(d.cause);
  }
  if (!error.empty()) throw AsyncError(error, std::move(cause));
}

bool in_task() { return t_worker_of != nullptr; }

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
