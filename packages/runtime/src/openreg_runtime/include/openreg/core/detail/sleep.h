#pragma once
// Where a stream's worker and the host threads waiting for it sleep once
// spinning has not paid off. Sleeping and waking are the slow paths, under
// one mutex; the hot paths only look at a flag or two.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "openreg/core/detail/task_list.h"

namespace openreg::detail {

class Sleep {
 public:
  // Launcher, after queueing: wakes the worker if it sleeps.
  void wake_worker() {
    // No fence before this look (see worker_sleep()): a fence would make every
    // launch wait for the task's link to reach the worker's core.
    if (worker_sleeping_.load(std::memory_order_relaxed)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
      }
      work_cv_.notify_one();
    }
  }
  // Worker: sleeps until `tasks` has a task, and pops it.
  TaskNode* worker_sleep(TaskList& tasks);
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
  void wake_host();

  alignas(kCacheLine) std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::atomic<bool> worker_sleeping_{false};
  std::atomic<int> host_waiters_{0};
  // The lowest sequence number a sleeping host thread waits for: the worker
  // wakes the host when it gets there, not after every task.
  std::atomic<uint64_t> wake_at_{UINT64_MAX};
};

}  // namespace openreg::detail
