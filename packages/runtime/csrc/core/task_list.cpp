#include "openreg/core/detail/task_list.h"

namespace openreg::detail {
namespace {

// malloc hands the memory of tasks just destroyed to the next launches (its
// per-thread caches are last in, first out). The worker has read those cache
// lines, so each write of a launch there would wait for the worker's core to
// give its copy up: asking for them now, for writing, does that in the
// background. A hint only: the memory is not touched.
void claim_lines(const void* p, uint32_t bytes) {
  for (uint32_t at = 0; at < bytes; at += kCacheLine) {
#if defined(__x86_64__)
    asm volatile("prefetchw (%0)" : : "r"(static_cast<const char*>(p) + at));
#else
    __builtin_prefetch(static_cast<const char*>(p) + at, 1);
#endif
  }
}

}  // namespace

void TaskList::destroy_finished() {
  TaskNode* first;
  TaskNode* end;
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
    TaskNode* next = first->next.load(std::memory_order_relaxed);
    if (first != &stub_) {
      const uint32_t bytes = first->bytes;
      delete first;
      claim_lines(first, bytes);
    }
    first = next;
  }
}

void TaskList::release_last() {
  SpinLock lock(launching_);  // last_ cannot change meanwhile, nor leave the list (nothing follows it)
  if (last_ != &stub_ && reached(last_->seq)) last_->release();
}

}  // namespace openreg::detail
