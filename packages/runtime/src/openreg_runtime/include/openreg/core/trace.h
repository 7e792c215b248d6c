#pragma once
// Task timing for profilers. While tracing, each task records when it was
// launched, by which host thread and under which tag (what the profiler asked
// for at the launch: its current op), and when it ran on its stream. Off, it
// costs a relaxed load per launch and per task.
#include <atomic>
#include <cstdint>
#include <vector>

namespace openreg {
class Stream;
}

namespace openreg::trace {

namespace detail {
extern std::atomic<bool> g_on;
}
inline bool on() { return detail::g_on.load(std::memory_order_relaxed); }

// Nanoseconds since the Unix epoch: the clock PyTorch's profiler (c10::getTime, Kineto) stamps host ops with,
// so device work lines up with the ops that launched it.
int64_t now();

struct Record {
  const char* name;
  int device;
  int stream;
  uint64_t tag;       // 0 when the task was launched before tracing started
  int launch_thread;  // 0 when the host ran the work itself (Stream::InOrder): no launch

  int64_t launch_begin, launch_end;
  int64_t start, end;
};

// Asked on the launching thread at each launch while tracing.
using TagFn = uint64_t (*)();
// Forgets earlier records and starts recording.
void start(TagFn tag);
// Stops recording and returns the records of the tasks that ran meanwhile,
// in the order they finished.
std::vector<Record> stop();

// Stream::launch, just before `task` is queued (the worker may run it at once);
// `begin` is now() when the launch began.
void launched(const void* task, int64_t begin);
// Stream::run_task, once `task`, named `name`, has run from `start` on.
void ran(const Stream& stream, const void* task, const char* name, int64_t start);
// Stream::InOrder: the calling thread did `name` itself in `stream`'s order from `start` on.
void ran_here(const Stream& stream, const char* name, int64_t start);

}  // namespace openreg::trace
