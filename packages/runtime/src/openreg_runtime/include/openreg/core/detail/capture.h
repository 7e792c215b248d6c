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
  void record(std::unique_ptr<TaskNode> node);
  // Work `stream` does after waiting for an event this capture recorded
  // belongs to the capture too (a fork); its launches are recorded from now on.
  void join(Stream& stream);
  bool has(const Stream& stream);
  void on_replay(std::function<void()> hook);
  // The streams stop capturing; returns the tasks recorded.
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
  std::vector<Stream*> streams_;  // the capturing stream first, then those it forked to
  std::string failure_;
};

}  // namespace openreg::detail
