#pragma once
// A graph capture in progress (graph.cpp): the tasks launched on its streams,
// and what it allows other calls meanwhile.
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "openreg/core/detail/task_list.h"
#include "openreg/core/graph.h"

namespace openreg::detail {

struct Capture : std::enable_shared_from_this<Capture> {
  Capture(Stream& stream, uint64_t pool, CaptureMode mode);
  // A launch on one of its streams: kept, not run.
  void record(const Stream& stream, std::unique_ptr<TaskNode> node);
  // An event recorded on `stream`: returns a mark of the captured work it
  // follows (its stream's, and what that stream had waited for).
  uint64_t mark(const Stream& stream);
  // `waiter` waits for an event recorded at `mark`. A waiter outside the
  // capture joins it (a fork): its launches are recorded from then on. The
  // capturing stream must follow all work of the streams forked to when the
  // capture ends (they were joined back, directly or through one another),
  // as CUDA requires.
  void wait(Stream& waiter, uint64_t mark);
  bool has(const Stream& stream);
  void on_replay(std::function<void()> hook);
  void retain(uint64_t pool);  // keeps `pool` in use for the graph (retain_pool)
  // The streams stop capturing; returns the tasks recorded. A stream forked
  // to with work not joined back fails the capture.
  std::vector<std::unique_ptr<TaskNode>> finish();
  std::vector<std::function<void()>> replay_hooks;  // read once finish() returned
  std::vector<uint64_t> retained_pools;             // read once finish() returned
  // The first broken rule, kept for capture_end() to raise; empty when none.
  void fail(const std::string& why);
  std::string failure();

  const uint64_t pool;
  const CaptureMode mode;
  const std::thread::id thread = std::this_thread::get_id();
  const int device;

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<TaskNode>> nodes_;
  // What a member's queue follows: per member (in streams_' order), how
  // many of its launches come before this point. A member follows its own.
  using Follows = std::vector<uint64_t>;
  struct Member {
    Stream* stream;
    Follows follows;
  };
  Member* member(const Stream& stream);  // null for a stream outside the capture
  std::vector<Member> streams_;          // the capturing stream first, then those it forked to
  std::vector<Follows> marks_;           // what each event recorded in the capture follows
  std::string failure_;
};

}  // namespace openreg::detail
