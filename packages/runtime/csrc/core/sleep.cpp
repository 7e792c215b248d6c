#include "openreg/core/detail/sleep.h"

#include <chrono>

namespace openreg::detail {
namespace {

// A dozing worker looks for work this often; it sleeps once a doze passed with no task run (by it or a host).
constexpr auto kDoze = std::chrono::microseconds(500);
// A worker that falls asleep looks for work once more after this long (see worker_sleep()).
constexpr auto kRecheck = std::chrono::microseconds(500);

}  // namespace

TaskNode* Sleep::worker_sleep(TaskList& tasks) {
  TaskNode* node = nullptr;
  auto take = [&] { return (node = tasks.take()) != nullptr; };
  std::unique_lock<std::mutex> lock(mu_);
  state_.store(State::kDozing, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (uint64_t done = tasks.completed(); !work_cv_.wait_for(lock, kDoze, take);) {
    if (tasks.completed() == done) break;  // the device stayed idle: sleep until a launch wakes it
    done = tasks.completed();
  }
  if (node == nullptr) {
    state_.store(State::kAsleep, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // A launch that raced with falling asleep may have missed the state (launchers
    // look without a fence) while its task was not yet visible here: it is
    // visible long before kRecheck, so the first sleep is bounded by it.
    if (!work_cv_.wait_for(lock, kRecheck, take)) work_cv_.wait(lock, take);
  }
  state_.store(State::kAwake, std::memory_order_relaxed);
  return node;
}

void Sleep::wake_now() {
  // Pairs with worker_sleep()'s fences: the worker either sees the turn free or is seen asleep.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (state_.load(std::memory_order_relaxed) != State::kAwake) wake();
}

void Sleep::wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
  }
  work_cv_.notify_one();
}

void Sleep::wake_host() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_at_.store(UINT64_MAX, std::memory_order_relaxed);
  }
  done_cv_.notify_all();
}

void Sleep::host_sleep(const TaskList& tasks, uint64_t seq) {
  std::unique_lock<std::mutex> lock(mu_);
  host_waiters_.fetch_add(1, std::memory_order_seq_cst);
  while (!tasks.reached(seq)) {
    // Published under mu_, so waiters keep the minimum; the worker clears it when it wakes them.
    if (seq < wake_at_.load(std::memory_order_relaxed)) wake_at_.store(seq, std::memory_order_seq_cst);
    // Pairs with task_done(): either the worker sees wake_at_, or we see its progress.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (tasks.reached(seq)) break;
    done_cv_.wait(lock);
  }
  host_waiters_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace openreg::detail
