#pragma once
// The stream sanitizer (OPENREG_SANITIZE=streams): finds work on two streams
// that touches the same device memory with nothing ordering them, memory
// freed and reused while another stream may still use it (a missing
// record_stream), and the unfinished writer of memory the host touches in
// strict mode. It follows the happens-before order the program asks for, not
// what the workers happened to do, so it reports the same on every run:
//  - each stream has a vector clock, the sequence number of the last task of
//    every stream that its next task is known to follow;
//  - an event carries the clock of its stream when recorded, and a stream
//    that waits for it takes it in; a host thread that waits for a stream or
//    event (synchronize, a query that says done) takes it into the host's
//    clock, which every later launch follows;
//  - per allocation it keeps the last write and the reads since, each with
//    its stream, sequence number, op and launch site.
// A launch whose access is not ordered after a conflicting access on another
// stream raises an Error (or warns) naming both. Off, it costs a relaxed load
// per launch. Graph captures and their replays are not checked.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "openreg/core/touch.h"

namespace openreg {
class Stream;
}

namespace openreg::sanitizer {

enum class Mode : int { kOff = 0, kError = 1, kWarn = 2 };

namespace detail {
extern std::atomic<int> g_mode;
}
inline bool on() { return detail::g_mode.load(std::memory_order_relaxed) != 0; }
Mode mode();
// Turning it on forgets what it knew: work queued before is treated as done.
void set_mode(Mode mode);
// Parses OPENREG_SANITIZE ("" or "0": off; "streams"; "streams:warn");
// throws an Error naming the variable.
Mode parse_mode(const char* text);

// Where a launch came from, captured by the layer above (the glue: the
// launching Python stack) and printed only in a report.
struct Hooks {
  std::shared_ptr<const void> (*capture_site)() = nullptr;
  std::string (*format_site)(const void* site) = nullptr;
  // How warn mode reports (the glue: a Python warning); stderr without it.
  void (*warn)(const std::string& report) = nullptr;
};
void set_hooks(const Hooks& hooks);

using Clock = std::vector<uint64_t>;

// Stream::launch: checks the task's touches (raising the report in error
// mode, before anything is queued), then records them once it has its number.
class Launch {
 public:
  Launch(const Stream& stream, const char* op, const Touch* touches, std::size_t n);
  ~Launch();
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
  void queued(uint64_t seq);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Work a host thread does in `stream`'s order once its queued work has run
// (a blocking copy, a scalar read): checked as a launch, then the host has
// seen the stream finish. Under AsIfQueued it is given a place of its own in
// the stream's order, as the kernel it stands for would have.
void host_work(Stream& stream, const char* op, const Touch* touches, std::size_t n);
// A host thread saw `stream` reach task `seq`.
void host_waited(const Stream& stream, uint64_t seq);
// In its scope the calling thread runs, at the call, work the program queues
// (an op's first call runs there so that its checks raise at the call): the
// waits that takes are the runtime's, not the program's, and order nothing.
class AsIfQueued {
 public:
  AsIfQueued();
  ~AsIfQueued();
  AsIfQueued(const AsIfQueued&) = delete;
  AsIfQueued& operator=(const AsIfQueued&) = delete;

 private:
  bool outer_;
};
// Events: the clock of `stream` after its last launch; a stream that waits
// for it; a host thread that saw it complete.
std::shared_ptr<const Clock> clock_of(const Stream& stream);
void stream_waits(const Stream& stream, const Clock& clock);
void host_waits(const Clock& clock);
// The allocator freed `base` (its next user is another allocation), or gave
// it back to the host (forget it).
void freed(const void* base);
void unmapped(const void* base);
// For strict mode's fault report, without waiting for a lock: which
// unfinished task writes the allocation at `base`. Empty when none is known.
std::size_t describe_unfinished_writer(std::uintptr_t base, char* out, std::size_t size);

}  // namespace openreg::sanitizer
