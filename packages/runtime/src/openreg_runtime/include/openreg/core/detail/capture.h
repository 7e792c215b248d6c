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
  // How much `stream` has launched in the capture: an event recorded there
  // covers that much of its work.
  uint64_t work_of(const Stream& stream);
  // `waiter` waits for an event recorded on `from` when `from` had launched
  // `work`. A waiter outside the capture joins it (a fork): its launches are
  // recorded from then on. Work a stream forked to launches must be waited
  // for in the capture before it ends (joined back), as CUDA requires.
  void wait(Stream& waiter, const Stream& from, uint64_t work);
  bool has(const Stream& stream);
  void on_replay(std::function<void()> hook);
  // The streams stop capturing; returns the tasks recorded. A stream forked
  // to with work not joined back fails the capture.
  std::vector<std::unique_ptr<TaskNode>> finish();
  std::vector<std::function<void()>> replay_hooks;  // read once finish() returned
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
  struct Member {
    Stream* stream;
    uint64_t work;    // launches (a fork counts as one)
    uint64_t joined;  // how much of that another stream of the capture waited for
  };
  Member* member(const Stream& stream);  // null for a stream outside the capture
  std::vector<Member> streams_;          // the capturing stream first, then those it forked to
  std::string failure_;
};

}  // namespace openreg::detail
