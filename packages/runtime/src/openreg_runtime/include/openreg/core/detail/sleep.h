#pragma once
// Where a stream's worker and the host threads waiting for it sleep once
// spinning has not paid off. Sleeping and waking are the slow paths, under
// one mutex; the hot paths only look at a flag or two.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "openreg/core/detail/task_list.h"

namespace openreg::detail {

class Sleep {
 public:
  // Launcher, after queueing task `seq`: wakes the worker if it sleeps, or if it dozes and more than a few
  // tasks are queued. A host thread that launches a few ops onto an idle device most often reads the result
  // at once (`.item()`, a Python loop over a tensor) and then runs them itself: the futex wake, and the woken
  // worker taking a core from the host, would cost more than the tasks. The worker's doze ends within kDoze.
  void wake_worker(const TaskList& tasks, uint64_t seq) {
    // No fence before this look (see worker_sleep()): a fence would make every
    // launch wait for the task's link to reach the worker's core.
    const State state = state_.load(std::memory_order_relaxed);
    if (state == State::kAwake || (state == State::kDozing && tasks.reached(seq - std::min(seq, kLeftToHost)))) {
      return;
    }
    wake();
  }
  // Worker: sleeps until it can take a task of `tasks` (TaskList::take()), and takes it.
  TaskNode* worker_sleep(TaskList& tasks);
  // A host thread that ran tasks in the worker's place and gave the turn back with tasks still queued, or
  // another stream's worker waiting for this stream: wakes the worker if it dozes or sleeps.
  void wake_now();
  // Worker, after each task: `done` tasks have run.
  void task_done(uint64_t done) {
    // A futex wake per task would wake a waiting host for nothing, on cores the kernels need.
    if (host_waiters_.load(std::memory_order_seq_cst) > 0 && done >= wake_at_.load(std::memory_order_seq_cst)) {
      wake_host();
    }
  }
  // Host: sleeps until task `seq` of `tasks` has run.
  void host_sleep(const TaskList& tasks, uint64_t seq);

 private:
  enum class State : uint8_t { kAwake, kDozing, kAsleep };
  static constexpr uint64_t kLeftToHost = 4;  // queued tasks a dozing worker is not woken for

  void wake();
  void wake_host();

  alignas(kCacheLine) std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::atomic<State> state_{State::kAwake};  // the worker's
  std::atomic<int> host_waiters_{0};
  // The lowest sequence number a sleeping host thread waits for: the worker
  // wakes the host when it gets there, not after every task.
  std::atomic<uint64_t> wake_at_{UINT64_MAX};
};

}  // namespace openreg::detail
