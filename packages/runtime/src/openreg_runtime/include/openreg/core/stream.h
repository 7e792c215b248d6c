#pragma once
// Streams and events. Every stream owns a worker thread (started on first
// use) that runs its tasks in order, so the host returns as soon as work is
// queued, as on a GPU. A task that throws records the failure on its device;
// the next synchronising call on that device raises it, naming the task.
//
// Launching is the hot path of every op, so the worker and the host share no
// lock: tasks travel through a lock-free list, and the host destroys a task
// the worker has moved past at its next launch or wait. Memory is then
// allocated and freed on the same thread (the allocator's per-thread caches
// hit), what a task captured never needs the GIL on the worker, and the
// worker writes into no task (each line it wrote would have to travel back
// to the host's core before the host could reuse the memory).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace openreg {

class Stream;

// A unit of work for a stream: one allocation holds the callable and the
// stream's queue links. Move-only, so callables may own what they capture.
class Task {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Task>>>
  Task(F&& f) : node_(new Holder<std::decay_t<F>>(std::forward<F>(f))) {}  // NOLINT: implicit, like std::function

 private:
  friend class Stream;
  friend class HostIdle;
  struct Node {
    virtual ~Node() = default;
    virtual void run() {}
    virtual void release() {}  // destroys what the callable captured (once it has run)
    std::atomic<Node*> next{nullptr};
    const char* name = nullptr;
    uint64_t seq = 0;
    uint32_t bytes = sizeof(Node);  // of the whole holder
  };
  template <class F>
  struct Holder final : Node {
    explicit Holder(F&& f) : fn(std::move(f)) { bytes = sizeof(Holder); }
    explicit Holder(const F& f) : fn(f) { bytes = sizeof(Holder); }
    void run() override { (*fn)(); }
    void release() override { fn.reset(); }
    std::optional<F> fn;
  };
  std::unique_ptr<Node> node_;
};

// Stream 0 of each device is its default stream; 1..kPoolSize form the pool
// that new streams are drawn from round-robin (CUDA's scheme).
constexpr int kPoolSize = 32;

class Stream {
 public:
  Stream(int device, int id) : device_(device), id_(id) {}
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int device() const { return device_; }
  int id() const { return id_; }

  // Queues `task` and returns its sequence number. `name` must outlive the
  // task (a string literal or an interned op name). Under
  // OPENREG_LAUNCH_BLOCKING=1 it also waits and raises any failure.
  uint64_t launch(const char* name, Task task);

  bool query() const { return completed_.load(std::memory_order_acquire) == enqueued_.load(std::memory_order_acquire); }
  bool reached(uint64_t seq) const { return completed_.load(std::memory_order_acquire) >= seq; }
  uint64_t last() const { return enqueued_.load(std::memory_order_acquire); }

  // Blocks until task `seq` has run and destroys finished tasks; raises nothing.
  void wait_for(uint64_t seq);
  // Blocks until everything queued has run, then raises a pending failure.
  void synchronize();

 private:
  using Node = Task::Node;
  Node* pop();  // worker only; null when empty
  Node* next_task();
  void run();
  void destroy_finished();
  void release_last();

  const int device_;
  const int id_;
  // A single-producer linked list: launchers take turns under launching_ and
  // append behind last_; the worker follows front_, the node it ran last (at
  // first the stub). The host destroys nodes from oldest_ on once the worker
  // has moved past them, so the last one stays after running: a wait
  // releases what it captured.
  // What the host writes at every launch and what the worker writes at every
  // task sit on cache lines of their own: sharing one made each launch wait
  // for the line to come back from the worker's core.
  static constexpr std::size_t kLine = 64;
  // Orders concurrent launchers and clean-ups (held briefly); never taken by the worker.
  alignas(kLine) std::atomic_flag launching_ = ATOMIC_FLAG_INIT;
  std::atomic<uint64_t> enqueued_{0};
  Node* last_ = &stub_;
  Node* oldest_ = &stub_;  // the first node not yet destroyed
  alignas(kLine) Node* front_ = &stub_;
  std::atomic<uint64_t> completed_{0};
  alignas(kLine) Node stub_;
  // Sleeping and waking are the slow paths, under mu_.
  alignas(kLine) std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::atomic<bool> worker_sleeping_{false};
  std::atomic<int> host_waiters_{0};
  // The lowest sequence number a sleeping host thread waits for: the worker
  // wakes the host when it gets there, not after every task.
  std::atomic<uint64_t> wake_at_{UINT64_MAX};
  std::thread worker_;
};

// Streams live for the whole process; they are created on first access.
Stream& get_stream(int device, int id);
// Next pool stream of `device`, round-robin.
int next_pool_stream(int device);
// The calling thread's current stream on `device` (default stream unless set).
Stream& current_stream(int device);
void set_current_stream(int device, int id);

// Asked on a worker before a task runs: is the host idle (a host thread waits
// for the device)? Only a hook that needs the answer asks: it may take a while.
class HostIdle {
 public:
  bool operator()() const;

 private:
  friend class Stream;
  explicit HostIdle(const Task::Node& task) : task_(task) {}
  const Task::Node& task_;
};

// The device computes on the host's cores: a kernel that used them all while
// a host thread runs would slow both (a thread team waits for its slowest
// member, and the host thread takes a core from one). The hook runs on a
// worker before each task; the glue sizes the kernels' thread team there.
using TaskHook = void (*)(const HostIdle& host_idle);
void set_task_hook(TaskHook hook);

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
  void block(Stream& stream) const;
  bool query() const;
  void synchronize() const;
  // Milliseconds from this event to `end`; both must be timed and complete.
  double elapsed_ms(const Event& end) const;
  bool recorded() const { return state_ != nullptr; }
  int device() const;

 private:
  bool timing_;
  std::shared_ptr<EventState> state_;
};

}  // namespace openreg
