#include "openreg/core/graph.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>

#include "openreg/core/detail/capture.h"
#include "openreg/core/error.h"
#include "openreg/core/memory.h"

namespace openreg {
namespace {

std::atomic<uint64_t> g_pools{0};
// Captures in progress. The count spares every wait the lock while none runs.
std::mutex g_active_mu;
std::vector<detail::Capture*> g_active;
std::atomic<int> g_active_count{0};

const char* mode_name(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::Global:
      return "global";
    case CaptureMode::ThreadLocal:
      return "thread_local";
    case CaptureMode::Relaxed:
      return "relaxed";
  }
  return "?";
}

std::string where(const Stream& s) {
  return "openreg:" + std::to_string(s.device()) + " stream " + std::to_string(s.id());
}

}  // namespace

namespace detail {

Capture::Capture(Stream& stream, uint64_t pool, CaptureMode mode) : pool(pool), mode(mode), device(stream.device()) {
  streams_.push_back({&stream, {0}});
}

Capture::Member* Capture::member(const Stream& stream) {
  for (Member& m : streams_) {
    if (m.stream == &stream) return &m;
  }
  return nullptr;
}

void Capture::record(const Stream& stream, std::unique_ptr<TaskNode> node) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (streams_[i].stream == &stream) ++streams_[i].follows[i];
  }
  nodes_.push_back(std::move(node));
}

uint64_t Capture::mark(const Stream& stream) {
  std::lock_guard<std::mutex> lock(mu_);
  const Member* m = member(stream);
  marks_.push_back(m == nullptr ? Follows{} : m->follows);
  return marks_.size() - 1;
}

void Capture::wait(Stream& waiter, uint64_t mark) {
  std::lock_guard<std::mutex> lock(mu_);
  if (member(waiter) == nullptr) {
    if (waiter.capture() != nullptr) {
      throw Error("openreg: " + where(waiter) + " already captures another graph: a stream captures one at a time");
    }
    streams_.push_back({&waiter, Follows(streams_.size() + 1, 0)});
    streams_.back().follows.back() = 1;  // the fork itself must be joined back, even with nothing launched
    waiter.capture_.store(this, std::memory_order_release);
  }
  Follows& follows = member(waiter)->follows;
  const Follows& marked = marks_.at(mark);
  if (follows.size() < marked.size()) follows.resize(marked.size(), 0);
  for (size_t i = 0; i < marked.size(); ++i) follows[i] = std::max(follows[i], marked[i]);
}

bool Capture::has(const Stream& stream) {
  std::lock_guard<std::mutex> lock(mu_);
  return member(stream) != nullptr;
}

void Capture::on_replay(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  replay_hooks.push_back(std::move(hook));
}

void Capture::retain(uint64_t pool) {
  device_memory(device).use_pool(pool);
  std::lock_guard<std::mutex> lock(mu_);
  retained_pools.push_back(pool);
}

std::vector<std::unique_ptr<TaskNode>> Capture::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  Follows& capturing = streams_[0].follows;
  capturing.resize(streams_.size(), 0);
  for (size_t i = 1; i < streams_.size() && failure_.empty(); ++i) {
    if (streams_[i].follows[i] > capturing[i]) {
      failure_ = "openreg: " + where(*streams_[i].stream) +
                 " joined the capture (it waited for an event recorded in it) and the capture ended before "
                 "its work was waited for. Make the capturing stream wait for it (capturing.wait_stream(s)) "
                 "before capture_end(), as CUDA requires";
    }
  }
  for (const Member& m : streams_) m.stream->capture_.store(nullptr, std::memory_order_release);
  streams_.clear();
  return std::move(nodes_);
}

void Capture::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.empty()) failure_ = why;
}

std::string Capture::failure() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

}  // namespace detail

uint64_t new_graph_pool() { return g_pools.fetch_add(1, std::memory_order_relaxed) + 1; }

bool is_capturing(const Stream& stream) { return stream.capture() != nullptr; }

bool capture_underway() { return g_active_count.load(std::memory_order_acquire) != 0; }

bool on_replay(const Stream& stream, std::function<void()> hook) {
  detail::Capture* c = stream.capture();
  if (c == nullptr) return false;
  c->on_replay(std::move(hook));
  return true;
}

uint64_t capture_pool(const Stream& stream) {
  detail::Capture* c = stream.capture();
  return c == nullptr ? 0 : c->pool;
}

bool retain_pool(const Stream& stream, uint64_t pool) {
  detail::Capture* c = stream.capture();
  if (c == nullptr) return false;
  c->retain(pool);
  return true;
}

namespace {

bool forbids(const detail::Capture& c, bool own) {
  return own || c.mode == CaptureMode::Global ||
         (c.mode == CaptureMode::ThreadLocal && c.thread == std::this_thread::get_id());
}

// Whether a capture may forbid this thread to wait: a task waits in place, for its own stream only.
bool some_capture_may_forbid() { return g_active_count.load(std::memory_order_acquire) != 0 && !in_task(); }

// Under g_active_mu: the first active capture that forbids this thread to wait for `stream` (nullptr: a call
// that waits for no stream of its own), or nullptr.
detail::Capture* forbidding(const Stream* stream) {
  for (detail::Capture* c : g_active) {
    if (forbids(*c, stream != nullptr && c->has(*stream))) return c;
  }
  return nullptr;
}

}  // namespace

bool may_wait(const Stream& stream) {
  if (!some_capture_may_forbid()) return true;
  std::lock_guard<std::mutex> lock(g_active_mu);
  return forbidding(&stream) == nullptr;
}

void check_may_wait(const Stream* stream, const char* call) {
  if (!some_capture_may_forbid()) return;
  std::lock_guard<std::mutex> lock(g_active_mu);  // the capture cannot end meanwhile
  detail::Capture* c = forbidding(stream);
  if (c == nullptr) return;
  const bool own = stream != nullptr && c->has(*stream);
  const bool this_thread = c->thread == std::this_thread::get_id();
  std::string why = std::string("openreg: ") + call + " is not allowed while " +
                    (own ? where(*stream) +
                               " is capturing a graph: the work it would wait for is only recorded, "
                               "and runs at replay()"
                         : std::string("a graph is capturing in \"") + mode_name(c->mode) +
                               "\" mode, which forbids synchronizing calls" + (this_thread ? "" : " in every thread") +
                               " (capture_error_mode=\"relaxed\" allows them on other streams)") +
                    ". Synchronize before capture_begin() or after capture_end().";
  if (own || this_thread) c->fail(why);
  throw Error(why);
}

struct Graph::Work {
  std::vector<std::unique_ptr<detail::TaskNode>> tasks;
  std::vector<std::function<void()>> on_replay;
  int device = -1;
  std::vector<uint64_t> retained_pools;  // given back once no replay can write into them
  ~Work() {
    for (uint64_t pool : retained_pools) device_memory(device).release_pool(pool);
  }
};

Graph::~Graph() {
  try {
    reset();
  } catch (...) {
  }
}

void Graph::capture_begin(Stream& stream, uint64_t pool, CaptureMode mode) {
  if (capture_ || work_) {
    throw Error("openreg: this graph already holds a capture: call reset() before capturing again");
  }
  if (stream.id() == 0) {
    throw Error("openreg: graphs cannot be captured on the default stream (" + where(stream) +
                "), as on CUDA: capture on a side stream (with torch.openreg.stream(torch.openreg.Stream()))");
  }
  if (stream.capture() != nullptr) {
    throw Error("openreg: " + where(stream) + " is capturing a graph already: end that capture first");
  }
  // Work queued before the capture is not part of it, and must not run into it.
  stream.synchronize();
  pool_ = pool != 0 ? pool : new_graph_pool();
  device_ = stream.device();
  device_memory(device_).use_pool(pool_);
  capture_ = std::make_shared<detail::Capture>(stream, pool_, mode);
  {
    std::lock_guard<std::mutex> lock(g_active_mu);
    g_active.push_back(capture_.get());
    g_active_count.fetch_add(1, std::memory_order_release);
  }
  stream.capture_.store(capture_.get(), std::memory_order_release);
}

std::string Graph::stop() {
  {
    std::lock_guard<std::mutex> lock(g_active_mu);
    g_active.erase(std::find(g_active.begin(), g_active.end(), capture_.get()));
    g_active_count.fetch_sub(1, std::memory_order_release);
  }
  auto work = std::make_shared<Work>();
  work->tasks = capture_->finish();
  work->on_replay = std::move(capture_->replay_hooks);
  work->device = device_;
  work->retained_pools = std::move(capture_->retained_pools);
  std::string failure = capture_->failure();
  capture_.reset();
  work_ = std::move(work);
  return failure;
}

void Graph::capture_end() {
  if (!capture_) throw Error("openreg: capture_end() without capture_begin()");
  const std::string failure = stop();
  if (!failure.empty()) {
    reset();
    throw Error("openreg: the graph capture is invalid, and is discarded: " + failure);
  }
}

void Graph::replay(Stream& stream) {
  if (!work_) throw Error("openreg: replay() needs a captured graph: capture one first");
  if (stream.device() != device_) {
    throw Error("openreg: this graph was captured on openreg:" + std::to_string(device_) +
                "; replay it with that device current");
  }
  for (const auto& hook : work_->on_replay) hook();
  stream.launch("graph replay", [work = work_] {
    for (const auto& task : work->tasks) {
      try {
        task->run();
      } catch (const AsyncError& e) {
        throw AsyncError(std::string("'") + task->name + "' (replayed from a graph): " + e.what(), e.cause);
      } catch (const std::exception& e) {
        throw AsyncError(std::string("'") + task->name + "' (replayed from a graph): " + e.what(),
                         std::current_exception());
      }
    }
  });
}

void Graph::reset() {
  if (capture_) stop();
  work_.reset();
  if (pool_ != 0) device_memory(device_).release_pool(pool_);
  pool_ = 0;
}

bool Graph::empty() const { return work_ == nullptr || work_->tasks.empty(); }

std::vector<std::string> Graph::listing() const {
  std::vector<std::string> names;
  if (work_) {
    for (const auto& task : work_->tasks) names.emplace_back(task->name);
  }
  return names;
}

}  // namespace openreg
