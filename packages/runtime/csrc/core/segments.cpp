#include "openreg/core/segments.h"

#include <sys/mman.h>

#include "openreg/core/detail/segment_map.h"
#include "openreg/core/device.h"
#include "openreg/core/strict.h"

namespace openreg {

namespace detail {

// Never destroyed: tensors may be freed during exit.
SegmentMap& segments() {
  static auto& map = *new SegmentMap;
  return map;
}

std::mutex& segments_mutex() {
  static auto& mu = *new std::mutex;
  return mu;
}

SegmentMap::iterator find_segment(std::uintptr_t p) {
  auto it = segments().upper_bound(p);
  if (it == segments().begin()) return segments().end();
  --it;
  return p < it->first + it->second.size ? it : segments().end();
}

void* map_segment(std::size_t size, int device) {
  void* p = mmap(nullptr, size, device_protection(), MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (size >= (2u << 20)) madvise(p, size, MADV_HUGEPAGE);
  add_segment(p, size, device);
  return p;
}

void unmap_segment(void* ptr, std::size_t size) {
  remove_segment(ptr);
  munmap(ptr, size);
}

}  // namespace detail

int device_of(const void* ptr) {
  std::lock_guard<std::mutex> lock(detail::segments_mutex());
  auto it = detail::find_segment(reinterpret_cast<std::uintptr_t>(ptr));
  return it == detail::segments().end() ? -1 : it->second.device;
}

void add_segment(void* ptr, std::size_t size, int device) {
  {
    std::lock_guard<std::mutex> lock(detail::segments_mutex());
    detail::segments()[reinterpret_cast<std::uintptr_t>(ptr)] = detail::Segment{size, device, 0};
  }
  mark_initialized();
}

void remove_segment(void* ptr) {
  std::lock_guard<std::mutex> lock(detail::segments_mutex());
  detail::segments().erase(reinterpret_cast<std::uintptr_t>(ptr));
}

}  // namespace openreg
