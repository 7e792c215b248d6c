#pragma once
// The registry behind segments.h, shared with strict mode's protection.
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace openreg::detail {

struct Segment {
  std::size_t size;
  int device;
  int access;  // kernels currently using it (strict mode)
};
using SegmentMap = std::map<std::uintptr_t, Segment>;

// Every segment of every device, by start address, under segments_mutex().
SegmentMap& segments();
std::mutex& segments_mutex();
// The segment containing `p`, or segments().end(); hold segments_mutex().
SegmentMap::iterator find_segment(std::uintptr_t p);

// Maps `size` bytes of new device memory and registers them; null when the host has none.
void* map_segment(std::size_t size, int device);
void unmap_segment(void* ptr, std::size_t size);

}  // namespace openreg::detail
