#include "openreg/glue/memory_history.h"

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
bool g_stacks = false;
std::size_t g_max_entries = 0;
std::deque<Entry> g_entries;
std::unordered_map<uintptr_t, Live> g_live;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<torch::CapturedTraceback> gather() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}

void push(Entry e) {
  g_entries.push_back(std::move(e));
  while (g_entries.size() > g_max_entries) g_entries.pop_front();
}

}  // namespace

void record(bool enabled, bool stacks, std::size_t max_entries) {
  std::lock_guard<std::mutex> lock(g_mu);
  journal_segments(enabled);
  if (enabled) {
    g_entries.clear();
    g_live.clear();
    for (int d = 0; d < device_count(); ++d) device_memory(d).take_notes();
  }
  g_stacks = stacks;
  g_max_entries = max_entries;
  g_recording.store(enabled, std::memory_order_release);
}

bool recording() { return g_recording.load(std::memory_order_relaxed); }

void note_segments(int device, std::shared_ptr<torch::CapturedTraceback> frames) {
  std::vector<SegmentNote> notes = device_memory(device).take_notes();
  if (notes.empty()) return;
  if (g_stacks && frames == nullptr) frames = gather();
  static constexpr const char* kActions[] = {"segment_alloc", "segment_free", "oom"};
  std::lock_guard<std::mutex> lock(g_mu);
  for (const SegmentNote& n : notes) push(Entry{kActions[n.kind], device, n.addr, n.size, n.stream, now_us(), frames});
}

void on_alloc(int device, void* ptr, std::size_t size, int stream) {
  // The stack is gathered before the lock: gathering Python frames may wait for the GIL.
  std::shared_ptr<torch::CapturedTraceback> frames;
  if (g_stacks) frames = gather();
  note_segments(device, frames);  // the segment made for this block comes first
  std::lock_guard<std::mutex> lock(g_mu);
  auto addr = reinterpret_cast<uintptr_t>(ptr);
  g_live[addr] = Live{device, size, stream, frames};
  push(Entry{"alloc", device, addr, size, stream, now_us(), std::move(frames)});
}

void on_free(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_live.count(reinterpret_cast<uintptr_t>(ptr)) == 0) return;  // allocated before recording started
  }
  std::shared_ptr<torch::CapturedTraceback> frames;
  if (g_stacks) frames = gather();
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
