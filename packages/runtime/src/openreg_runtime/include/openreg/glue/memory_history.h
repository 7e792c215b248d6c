#pragma once
// The allocator's history for torch.openreg.memory._record_memory_history
// and _snapshot (torch.cuda's formats): each allocation and free, with the
// Python stack that made it, while recording. Costs one atomic load per
// allocation while not.
#include <torch/csrc/profiler/combined_traceback.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace openreg::glue::history {

struct Entry {
  // "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom"
  const char* action;
  int device;
  uintptr_t addr;  // "oom": the bytes still free
  std::size_t size;
  int stream;
  int64_t time_us;
  std::shared_ptr<torch::CapturedTraceback> frames;  // null without stacks
};

// Which stacks are kept, as torch.cuda's `context`: none; the stacks of live
// allocations (the snapshot's blocks); also the trace's allocations; also its frees.
enum class Context { kNever, kState, kAlloc, kAll };

// Starts or stops recording; keeps the last `max_entries` entries of the trace,
// leaving out the actions in `skip`. What was recorded is kept while recording
// goes on (re-calls change the options), dropped when it stops or on `clear`.
void record(bool enabled, Context context, std::size_t max_entries, std::vector<std::string> skip, bool clear);
bool recording();

void on_alloc(int device, void* ptr, std::size_t size, int stream);
// Takes the segments the allocator of `device` mapped and unmapped, and the
// allocations it refused, since the last call (core/memory.h's SegmentNote),
// with `frames` or the caller's stack. Called after the allocator returned
// or threw, outside its lock.
void note_segments(int device, std::shared_ptr<torch::CapturedTraceback> frames = nullptr);
void on_free(void* ptr);

std::vector<Entry> entries();
// The stack of the live allocation at `ptr`, if recorded.
std::shared_ptr<torch::CapturedTraceback> stack_of(const void* ptr);

}  // namespace openreg::glue::history
