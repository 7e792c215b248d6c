#include "openreg/glue/memory_history.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "openreg/core/device.h"
#include "openreg/core/memory.h"

namespace openreg::glue::history {
namespace {

struct Live {
  int device;
  std::size_t size;
  int stream;
  std::shared_ptr<torch::CapturedTraceback> frames;
};

std::atomic<bool> g_recording{false};
std::mutex g_mu;
std::atomic<Context> g_context{Context::kNever};
std::size_t g_max_entries = 0;
std::vector<std::string> g_skip;
std::deque<Entry> g_entries;
std::unordered_map<uintptr_t, Live> g_live;
std::unordered_map<uintptr_t, std::shared_ptr<torch::CapturedTraceback>> g_segments;  // the stacks that mapped them

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<torch::CapturedTraceback> gather() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}

bool keeps(Context at_least) { return g_context.load(std::memory_order_relaxed) >= at_least; }

// Under g_mu.
void push(Entry e) {
  if (std::find(g_skip.begin(), g_skip.end(), e.action) != g_skip.end()) return;
  g_entries.push_back(std::move(e));
  while (g_entries.size() > g_max_entries) g_entries.pop_front();
}

}  // namespace

void record(bool enabled, Context context, std::size_t max_entries, std::vector<std::string> skip, bool clear) {
  std::lock_guard<std::mutex> lock(g_mu);
  journal_segments(enabled);
  const bool starts = enabled && (clear || !recording());
  // As CUDA's: stopping drops the trace; live blocks keep their stacks for the snapshot until recording starts anew.
  if (!enabled || starts) {
    g_entries.clear();
    for (int d = 0; d < device_count(); ++d) device_memory(d).take_notes();
  }
  if (starts) {
    g_live.clear();
    g_segments.clear();
  }
  g_context.store(enabled ? context : Context::kNever, std::memory_order_relaxed);
  g_max_entries = max_entries;
  while (g_entries.size() > g_max_entries) g_entries.pop_front();
  g_skip = std::move(skip);
  g_recording.store(enabled, std::memory_order_release);
}

bool recording() { return g_recording.load(std::memory_order_relaxed); }

void note_segments(int device, std::shared_ptr<torch::CapturedTraceback> frames) {
  std::vector<SegmentNote> notes = device_memory(device).take_notes();
  if (notes.empty()) return;
  if (!keeps(Context::kAlloc)) {
    frames = nullptr;
  } else if (frames == nullptr) {
    frames = gather();
  }
  static constexpr const char* kActions[] = {"segment_alloc", "segment_free", "oom"};
  std::lock_guard<std::mutex> lock(g_mu);
  for (const SegmentNote& n : notes) {
    // As CUDA's: a freed segment shows the stack that mapped it, unless context="all" keeps the freeing one.
    std::shared_ptr<torch::CapturedTraceback> shown = frames;
    if (n.kind == SegmentNote::kMapped && frames != nullptr) g_segments[n.addr] = frames;
    if (n.kind == SegmentNote::kUnmapped) {
      auto mapped = g_segments.find(n.addr);
      if (!keeps(Context::kAll) && mapped != g_segments.end()) shown = mapped->second;
      if (mapped != g_segments.end()) g_segments.erase(mapped);
    }
    push(Entry{kActions[n.kind], device, n.addr, n.size, n.stream, now_us(), std::move(shown)});
  }
}

void on_alloc(int device, void* ptr, std::size_t size, int stream) {
  // The stack is gathered before the lock: gathering Python frames may wait for the GIL.
  // torch.cuda's contexts: "state" keeps it for the live block alone, "alloc" and "all" for the trace too.
  std::shared_ptr<torch::CapturedTraceback> frames;
  if (keeps(Context::kState)) frames = gather();
  note_segments(device, frames);  // the segment made for this block comes first
  std::lock_guard<std::mutex> lock(g_mu);
  auto addr = reinterpret_cast<uintptr_t>(ptr);
  g_live[addr] = Live{device, size, stream, frames};
  push(Entry{"alloc", device, addr, size, stream, now_us(), keeps(Context::kAlloc) ? std::move(frames) : nullptr});
}

void on_free(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_live.count(reinterpret_cast<uintptr_t>(ptr)) == 0) return;  // allocated before recording started
  }
  std::shared_ptr<torch::CapturedTraceback> frames;
  if (keeps(Context::kAll)) frames = gather();
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == g_live.end()) return;  // recording restarted meanwhile
  const Live& live = it->second;
  // openreg gives a freed block back in stream order at once from the host's view: requested and completed agree.
  for (const char* action : {"free_requested", "free_completed"}) {
    push(Entry{action, live.device, it->first, live.size, live.stream, now_us(), frames});
  }
  g_live.erase(it);
}

std::vector<Entry> entries() {
  if (recording()) {
    for (int d = 0; d < device_count(); ++d) note_segments(d);
  }
  std::lock_guard<std::mutex> lock(g_mu);
  return {g_entries.begin(), g_entries.end()};
}

std::shared_ptr<torch::CapturedTraceback> stack_of(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_live.find(reinterpret_cast<uintptr_t>(ptr));
  return it == g_live.end() ? nullptr : it->second.frames;
}

}  // namespace openreg::glue::history
