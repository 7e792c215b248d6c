#pragma once
// Graphs: work captured from a stream instead of run, replayed later as one
// launch, with CUDA graphs' rules. While a stream captures, its launches are
// recorded (nothing runs) and a call that would wait for it raises, as
// would, depending on the capture mode, a wait from another thread.
// Allocations on a capturing stream come from the graph's memory pool
// (memory.h), so replays find them at the same addresses.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "openreg/core/stream.h"

namespace openreg {

// CUDA's cudaStreamCaptureMode: which threads' synchronising calls raise
// while a capture runs. Global: any thread's; ThreadLocal: the capturing
// thread's; Relaxed: only waits for the capturing stream itself.
enum class CaptureMode { Global, ThreadLocal, Relaxed };

namespace detail {
struct Capture;
}

// A memory pool id for graphs to share (graph_pool_handle()); never 0.
uint64_t new_graph_pool();

class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Records the work launched on `stream` (and on streams it forks to
  // through events) until capture_end(). `pool` 0: a pool of its own.
  void capture_begin(Stream& stream, uint64_t pool, CaptureMode mode);
  // Raises if a call during the capture broke its rules (the capture is then
  // discarded); the device is usable either way.
  void capture_end();
  // Queues the recorded work on `stream` as one task.
  void replay(Stream& stream);
  // Drops the recorded work and gives back the pool; the graph can capture again.
  void reset();
  uint64_t pool() const { return pool_; }
  int device() const { return device_; }
  bool captured() const { return work_ != nullptr; }
  // The recorded tasks' names, in the order they run.
  std::vector<std::string> listing() const;
  bool empty() const;  // whether the capture recorded no task

 private:
  struct Work;
  // Ends the capture: the streams stop capturing; returns the first broken rule.
  std::string stop();
  std::shared_ptr<detail::Capture> capture_;
  std::shared_ptr<const Work> work_;  // shared with replays still queued
  uint64_t pool_ = 0;
  int device_ = -1;
};

// Runs `hook` on the host at every replay of the graph that `stream` is
// capturing, before the replay is queued: a random op draws its state there,
// so that each replay draws fresh numbers in launch order (CUDA graphs advance
// their philox offsets at replay). Returns false when `stream` does not capture.
bool on_replay(const Stream& stream, std::function<void()> hook);

// Whether `stream` is capturing now.
bool is_capturing(const Stream& stream);
// Whether some stream of some device is capturing now.
bool capture_underway();
// The pool that allocations on `stream` come from: 0 when it does not capture.
uint64_t capture_pool(const Stream& stream);
// While `stream` captures, its graph keeps `pool` in use (the replays write
// into what was allocated from it) until the graph is reset or destroyed.
// Returns false when `stream` does not capture.
bool retain_pool(const Stream& stream, uint64_t pool);

// Raises when the calling thread may not wait for `stream` now, naming
// `call`; marks the captures it broke as failed.
void check_may_wait(const Stream* stream, const char* call);
// Whether check_may_wait would let the calling thread wait for `stream`.
bool may_wait(const Stream& stream);

}  // namespace openreg
