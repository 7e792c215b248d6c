#pragma once
// The queue between a stream's launching host threads and its worker.
//
// Launching is the hot path of every op, so the two sides share no lock:
// tasks travel through a single-producer linked list, and the host destroys a
// task the worker has moved past at its next launch or wait. Memory is then
// allocated and freed on the same thread (the allocator's per-thread caches
// hit), what a task captured never needs the GIL on the worker, and the
// worker writes into no task (each line it wrote would have to travel back
// to the host's core before the host could reuse the memory).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include "openreg/core/detail/spin.h"

namespace openreg::detail {

// What the host and a worker write often sits on cache lines of their own:
// sharing one made each launch wait for the line to come back from the
// worker's core.
constexpr std::size_t kCacheLine = 64;

// One task: the callable and its queue links in a single allocation.
struct TaskNode {
  virtual ~TaskNode() = default;
  virtual void run() {}
  virtual void release() {}  // destroys what the callable captured (once it has run)
  std::atomic<TaskNode*> next{nullptr};
  const char* name = nullptr;
  uint64_t seq = 0;
  uint32_t bytes = sizeof(TaskNode);  // of the whole holder
};

template <class F>
struct TaskHolder final : TaskNode {
  explicit TaskHolder(F&& f) : fn(std::move(f)) { bytes = sizeof(TaskHolder); }
  explicit TaskHolder(const F& f) : fn(f) { bytes = sizeof(TaskHolder); }
  void run() override { (*fn)(); }
  void release() override { fn.reset(); }
  std::optional<F> fn;
};

class TaskList {
 public:
  TaskList() = default;
  TaskList(const TaskList&) = delete;
  TaskList& operator=(const TaskList&) = delete;

  // Host: queues `node` (the list's from now on) and returns its sequence number.
  uint64_t push(TaskNode* node) {
    SpinLock lock(launching_);
    // Numbered and queued under one lock, so sequence numbers follow queue order.
    const uint64_t seq = enqueued_.load(std::memory_order_relaxed) + 1;
    node->seq = seq;
    last_->next.store(node, std::memory_order_release);
    last_ = node;
    enqueued_.store(seq, std::memory_order_release);
    return seq;
  }

  // Runner (the worker, or a host thread that would otherwise wait for it): takes the turn and the next
  // task, or returns null (the turn not taken) when none is queued or another thread holds the turn.
  // Only the turn's holder runs tasks, so they run one at a time and in order, whichever thread runs them.
  TaskNode* take() {
    // A plain look first: a runner spinning on an empty queue keeps the line in its own cache.
    if (turn_.load(std::memory_order_relaxed) || turn_.exchange(true, std::memory_order_acquire)) return nullptr;
    TaskNode* next = front_->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      end_turn();
      return nullptr;
    }
    front_ = next;
    return next;
  }
  // Takes the turn when nothing is queued or running: the holder runs work in stream order until end_turn().
  bool take_turn_if_idle() {
    if (turn_.load(std::memory_order_relaxed) || turn_.exchange(true, std::memory_order_acquire)) return false;
    if (query()) return true;
    end_turn();
    return false;
  }
  // The turn's holder: the task it took last has run; returns how many have.
  uint64_t finish() { return completed_.fetch_add(1, std::memory_order_seq_cst) + 1; }
  void end_turn() { turn_.store(false, std::memory_order_release); }

  bool query() const { return completed_.load(std::memory_order_acquire) == enqueued_.load(std::memory_order_acquire); }
  uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
  bool reached(uint64_t seq) const { return completed_.load(std::memory_order_acquire) >= seq; }
  uint64_t last() const { return enqueued_.load(std::memory_order_acquire); }

  // Host: destroys the tasks the worker has moved past.
  void destroy_finished();
  // Host: destroys what the last task captured once it has run (the task
  // itself stays until another follows it).
  void release_last();

 private:
  // Launchers take turns under launching_ and append behind last_; the
  // turn's holder follows front_, the node run last (at first the stub). The host
  // destroys nodes from oldest_ on once the worker has moved past them.
  // Orders concurrent launchers and clean-ups (held briefly); never taken by the worker.
  alignas(kCacheLine) std::atomic_flag launching_ = ATOMIC_FLAG_INIT;
  std::atomic<uint64_t> enqueued_{0};
  TaskNode* last_ = &stub_;
  TaskNode* oldest_ = &stub_;  // the first node not yet destroyed
  alignas(kCacheLine) std::atomic<bool> turn_{false};
  TaskNode* front_ = &stub_;
  std::atomic<uint64_t> completed_{0};
  alignas(kCacheLine) TaskNode stub_;
};

}  // namespace openreg::detail
