#pragma once
// Streams and events. Every stream owns a worker thread (started on first
// use) that runs its tasks in order, so the host returns as soon as work is
// queued, as on a GPU. A task that throws records the failure on its device;
// the next synchronising call on that device raises it, naming the task.
// How tasks reach the worker without a lock is in detail/.
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>

#include "openreg/core/detail/sleep.h"
#include "openreg/core/detail/task_list.h"
#include "openreg/core/touch.h"

namespace openreg {

class Stream;
namespace detail {
struct Capture;
}

// A unit of work for a stream. Move-only, so callables may own what they capture.
class Task {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Task>>>
  Task(F&& f)
      : node_(new detail::TaskHolder<std::decay_t<F>>(std::forward<F>(f))) {}  // NOLINT: implicit, like std::function

 private:
  friend class Stream;
  std::unique_ptr<detail::TaskNode> node_;
};

// Stream 0 of each device is its default stream. New streams are drawn
// round-robin from a pool of kPoolSize per priority (CUDA's scheme): priority
// 0 (the default's) down to -(kPriorities - 1). A priority only labels a
// stream here: on a GPU it orders pending blocks, and the OS schedules every
// stream's worker alike. Ids 1..kPoolSize are priority 0's pool, the next
// kPoolSize priority -1's, and so on.
constexpr int kPoolSize = 32;
constexpr int kPriorities = 4;  // c10::cuda::max_compile_time_stream_priorities
// The streams after the pools are never handed out by them: libraries built on
// the runtime (collectives) queue work that blocks on other processes there,
// so it never sits in front of a user's stream (NCCL's internal streams).
constexpr int kReservedStreams = 3;
constexpr int kStreams = 1 + kPriorities * kPoolSize + kReservedStreams;
constexpr int reserved_stream(int which) { return 1 + kPriorities * kPoolSize + which; }
// The priority stream `id` runs at: 0 for the default and reserved streams.
constexpr int stream_priority(int id) { return id >= 1 && id <= kPriorities * kPoolSize ? -((id - 1) / kPoolSize) : 0; }

class Stream {
 public:
  Stream(int device, int id) : device_(device), id_(id) {}
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  int id() const { return id_; }

  // Queues `task` and returns its sequence number. `name` must outlive the
  // task (a string literal or an interned op name). Under
  // OPENREG_LAUNCH_BLOCKING=1 it also waits and raises any failure. While the
  // stream captures a graph, the capture keeps the task (none runs) and the
  // result is 0. `touches`: the device memory it reads and writes, for the
  // stream sanitizer (sanitizer.h), which may refuse the launch.
  uint64_t launch(const char* name, Task task, const Touch* touches = nullptr, std::size_t n = 0);

  bool query() const;
  // Whether a host thread other than the calling one holds the stream (InOrder): the work it does there runs
  // before what is launched meanwhile, so memory freed now may still be used by that later work.
  bool held_by_another_thread() const;
  // The graph capture recording this stream's launches, or null.
  detail::Capture* capture() const { return capture_.load(std::memory_order_acquire); }
  bool reached(uint64_t seq) const { return tasks_.reached(seq); }
  uint64_t last() const { return tasks_.last(); }

  // Blocks until task `seq` has run and destroys finished tasks. A host
  // thread runs queued tasks up to `seq` itself while the worker runs none:
  // waking the worker and sleeping until it reports costs more than the
  // tasks, above all when the OS is slow to schedule the worker (busy cores).
  // Raises only when a graph capture forbids the wait (graph.h), naming `call`.
  void wait_for(uint64_t seq, const char* call = "a call that waits for the stream");
  // Blocks until everything queued has run, then raises a pending failure.
  void synchronize();

  // Holds the stream for work the calling thread does itself in stream order
  // (a synchronous copy): waits for, or runs, everything queued, and tasks
  // launched meanwhile wait until it goes out of scope. Launches inside run in
  // place, as a task's do. Raises nothing.
  class InOrder {
   public:
    // `call` names the work in the error a graph capture raises (graph.h).
    explicit InOrder(Stream& stream, const char* call = "a call run in stream order");
    // For a short op the calling thread would launch: holds the stream only if nothing is queued or
    // running on it, no graph capture forbids waiting for it, and the thread has waited for a stream (read
    // a result) since it last ran kShortRunsPerWait ops this way; otherwise holds nothing and waits for
    // nothing. A thread that reads most often reads the result of what it launched last (`.item()`, a
    // Python loop over a tensor's elements): the trip through the worker would cost more than the op. A
    // thread that launches on and on gains more from the worker running its ops meanwhile.
    struct IfIdle {};
    static constexpr int kShortRunsPerWait = 4;
    InOrder(Stream& stream, const char* call, IfIdle);
    ~InOrder();
    explicit operator bool() const { return held_; }
    InOrder(const InOrder&) = delete;
    InOrder& operator=(const InOrder&) = delete;

   private:
    Stream& stream_;
    const Stream* outer_;  // what the thread ran as before (a worker, or nothing)
    const char* call_;
    bool held_ = true;
    int64_t traced_ = 0;  // when the work began, while tracing (trace.h)
    void hold();
  };

 private:
  void start_worker();
  void run();  // the worker's loop
  // Runs a task taken with tasks_.take() on the calling thread and gives the turn back.
  void run_task(detail::TaskNode* node);
  // A host thread, instead of waiting: runs queued tasks up to `seq` while the
  // turn is free. Returns whether task `seq` has run.
  bool run_until(uint64_t seq);

  const int device_;
  const int id_;
  std::atomic<bool> started_{false};  // whether worker_ runs
  std::atomic<int> holders_{0};       // host threads holding it (InOrder): one at a time, or none
  // The graph capture recording this stream's launches, if any (graph.cpp sets it).
  std::atomic<detail::Capture*> capture_{nullptr};
  friend struct detail::Capture;
  friend class Graph;
  detail::TaskList tasks_;
  detail::Sleep sleep_;
  std::thread worker_;
};

// Streams live for the whole process; they are created on first access.
Stream& get_stream(int device, int id);
// Next stream of `device`'s pool for `priority`, round-robin. A priority
// outside 0..-(kPriorities - 1) takes the nearest one, as CUDA does.
int next_pool_stream(int device, int priority = 0);
// The calling thread's current stream on `device` (default stream unless set).
Stream& current_stream(int device);
void set_current_stream(int device, int id);

// Waits for every stream of `device` that has been used, then raises a
// pending failure. A negative device means every device.
void synchronize_device(int device);
// Raises, and clears, the first failure recorded on `device`, if any (an AsyncError).
void raise_pending_error(int device);
// Whether the calling thread is a stream's worker, running a task: work it
// launches or waits for would wait for itself, so it runs in place instead.
bool in_task();

struct EventState;

// A marker in a stream. Copies share state; recording again re-arms it.
class Event {
 public:
  explicit Event(bool timing = false) : timing_(timing) {}
  void record(Stream& stream);
  // Makes `stream` wait until this event has completed (no-op if unrecorded).
  // Recorded by a capture, it joins `stream` to that capture instead (fork).
  void block(Stream& stream) const;
  bool query() const;
  void synchronize() const;
  // Milliseconds from this event to `end`; both must be timed and complete.
  double elapsed_ms(const Event& end) const;
  bool recorded() const { return state_ != nullptr; }
  int device() const;
  // The stream it was last recorded on; null if never.
  const Stream* stream() const;

 private:
  bool timing_;
  std::shared_ptr<EventState> state_;
};

}  // namespace openreg
