#include "openreg/core/stream.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "openreg/core/detail/capture.h"
#include "openreg/core/detail/spin.h"
#include "openreg/core/device.h"
#include "openreg/core/error.h"
#include "openreg/core/graph.h"
#include "openreg/core/sanitizer.h"
#include "openreg/core/trace.h"

namespace openreg {
namespace {

// Launches between two clean-ups of finished tasks (waits always clean up).
constexpr uint64_t kDestroyBatch = 32;

struct DeviceState {
  std::array<std::atomic<Stream*>, kStreams> streams{};
  std::array<std::atomic<int>, kPriorities> next_pool{};  // by -priority
  std::atomic<bool> failed{false};  // whether error holds one: every synchronising call looks, without the lock
  std::mutex error_mu;
  std::string error;         // first failure not yet raised
  std::exception_ptr cause;  // what that task threw
};

std::vector<DeviceState>& devices() {
  // Never destroyed: worker threads may still run while the process exits.
  static auto* states = new std::vector<DeviceState>(device_count());
  return *states;
}

std::mutex g_create_mu;  // held while a stream or its worker is created
thread_local std::array<int16_t, 64> t_current_stream{};
thread_local const Stream* t_worker_of = nullptr;  // the stream whose worker this thread is
thread_local int t_short_runs = 0;                 // ops held InOrder(IfIdle) since this thread last waited

void record_failure(int device, int stream, const char* name, const char* what, std::exception_ptr cause) {
  auto& d = devices()[device];
  std::lock_guard<std::mutex> lock(d.error_mu);
  if (d.error.empty()) {
    d.error = std::string("openreg: '") + name + "' failed asynchronously on openreg:" + std::to_string(device) +
              " (stream " + std::to_string(stream) + "): " + what;
    d.cause = std::move(cause);
    d.failed.store(true, std::memory_order_release);
  }
}

}  // namespace

uint64_t Stream::launch(const char* name, Task task, const Touch* touches, std::size_t n) {
  check_not_forked();
  const int64_t traced = trace::on() ? trace::now() : 0;
  task.node_->name = name;
  if (detail::Capture* capture = capture_.load(std::memory_order_acquire)) {
    capture->record(*this, std::move(task.node_));
    return 0;
  }
  if (!started_.load(std::memory_order_acquire)) start_worker();
  std::optional<sanitizer::Launch> checked;
  if (sanitizer::on()) checked.emplace(*this, name, touches, n);  // may refuse it
  if (traced != 0) trace::launched(task.node_.get(), traced);
  const uint64_t seq = tasks_.push(task.node_.release());  // the worker's now
  if (checked) checked->queued(seq);
  // In batches: the list's cache line moves between the cores at every look.
  if (seq % kDestroyBatch == 0) tasks_.destroy_finished();
  sleep_.wake_worker(tasks_, seq);
  if (config().launch_blocking) synchronize();
  return seq;
}

void Stream::start_worker() {
  std::lock_guard<std::mutex> lock(g_create_mu);
  if (started_.load(std::memory_order_relaxed)) return;
  mark_initialized();
  worker_ = std::thread([this] { run(); });
  started_.store(true, std::memory_order_release);
}

void Stream::run() {
  t_worker_of = this;
  // Scheduled as the host thread is (and so is the OpenMP team the worker starts, which inherits its policy):
  // a SCHED_BATCH worker waited for a whole scheduler slice at each wake-up on a busy machine.
  for (;;) {
    detail::TaskNode* node = nullptr;
    if (!detail::spin_until([&] { return (node = tasks_.take()) != nullptr; })) node = sleep_.worker_sleep(tasks_);
    run_task(node);
  }
}

void Stream::run_task(detail::TaskNode* node) {
  const int64_t traced = trace::on() ? trace::now() : 0;
  try {
    node->run();
  } catch (const std::exception& e) {
    record_failure(device_, id_, node->name, e.what(), std::current_exception());
  } catch (...) {
    record_failure(device_, id_, node->name, "unknown exception", std::current_exception());
  }
  // Before the task counts as done: a host that waited for it finds its record.
  if (traced != 0) trace::ran(*this, node, node->name, traced);
  sleep_.task_done(tasks_.finish());
  tasks_.end_turn();
}

bool Stream::run_until(uint64_t seq) {
  // A worker waiting for another stream (an event wait) leaves that stream's tasks to its own worker:
  // its kernels' thread team is sized for the worker it is, and its stream waits meanwhile anyway.
  if (t_worker_of != nullptr) return reached(seq);
  bool ran = false;
  while (!reached(seq)) {
    detail::TaskNode* node = tasks_.take();
    if (node == nullptr) break;
    ran = true;
    t_worker_of = this;  // what the task launches or waits for runs in place, as on the worker
    run_task(node);
    t_worker_of = nullptr;
  }
  if (ran && !tasks_.query()) sleep_.wake_now();
  return reached(seq);
}

void Stream::wait_for(uint64_t seq, const char* call) {
  // A task on this stream: what came before it has run, and what follows cannot run until it ends.
  if (t_worker_of == this) return;
  check_may_wait(this, call);
  if (t_worker_of == nullptr) t_short_runs = 0;
  // Another stream's worker (an event wait) runs none of this stream's tasks: one its launcher left to a
  // dozing worker must not wait for the doze to end.
  if (t_worker_of != nullptr && !reached(seq)) sleep_.wake_now();
  if (!detail::spin_until([&] { return run_until(seq); })) sleep_.host_sleep(tasks_, seq);
  tasks_.destroy_finished();
  tasks_.release_last();
  if (sanitizer::on() && t_worker_of == nullptr) sanitizer::host_waited(*this, seq);
}

bool Stream::query() const {
  const uint64_t seq = last();
  if (!tasks_.query()) return false;
  if (sanitizer::on() && t_worker_of == nullptr) sanitizer::host_waited(*this, seq);
  return true;
}

Stream::InOrder::InOrder(Stream& stream, const char* call) : stream_(stream), outer_(t_worker_of), call_(call) {
  check_not_forked();
  if (outer_ == &stream_) return;  // a task of this stream holds it already
  check_may_wait(&stream_, call);
  if (outer_ == nullptr) t_short_runs = 0;
  while (!stream_.tasks_.take_turn_if_idle()) stream_.wait_for(stream_.last(), call);
  hold();
}

Stream::InOrder::InOrder(Stream& stream, const char* call, IfIdle) : stream_(stream), outer_(t_worker_of), call_(call) {
  check_not_forked();
  if (outer_ == &stream_) return;
  held_ = t_short_runs < kShortRunsPerWait && stream_.capture() == nullptr && may_wait(stream_) &&
          stream_.tasks_.take_turn_if_idle();
  if (!held_) return;
  ++t_short_runs;
  hold();
}

bool Stream::held_by_another_thread() const {
  return holders_.load(std::memory_order_acquire) > 0 && t_worker_of != this;
}

void Stream::InOrder::hold() {
  stream_.holders_.fetch_add(1, std::memory_order_acq_rel);
  t_worker_of = &stream_;
  if (trace::on()) traced_ = trace::now();
}

Stream::InOrder::~InOrder() {
  if (outer_ == &stream_ || !held_) return;
  if (traced_ != 0) trace::ran_here(stream_, call_, traced_);
  t_worker_of = outer_;
  stream_.holders_.fetch_sub(1, std::memory_order_acq_rel);
  stream_.tasks_.end_turn();
  if (!stream_.tasks_.query()) stream_.sleep_.wake_now();
}

void Stream::synchronize() {
  check_not_forked();
  wait_for(last(), "synchronize()");
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

int next_pool_stream(int device, int priority) {
  check_device(device);
  const int level = std::clamp(-priority, 0, kPriorities - 1);
  return 1 + level * kPoolSize + devices()[device].next_pool[level].fetch_add(1) % kPoolSize;
}

Stream& current_stream(int device) {
  check_device(device);  // before it indexes the table
  return get_stream(device, t_current_stream[device]);
}

void set_current_stream(int device, int id) {
  get_stream(device, id);  // validates both
  t_current_stream[device] = static_cast<int16_t>(id);
}

void raise_pending_error(int device) {
  auto& d = devices()[device];
  if (!d.failed.load(std::memory_order_acquire)) return;
  std::string error;
  std::exception_ptr cause;
  {
    std::lock_guard<std::mutex> lock(d.error_mu);
    error.swap(d.error);
    cause.swap(d.cause);
    d.failed.store(false, std::memory_order_relaxed);
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
      if (Stream* s = slot.load(std::memory_order_acquire)) s->wait_for(s->last(), "synchronize() of the device");
    }
  }
  for (int dev = first; dev < end; ++dev) raise_pending_error(dev);
}

}  // namespace openreg
