#pragma once
// Which device owns a pointer. Every range of device memory (a segment) is
// registered here: the allocator's, and memory it does not own (shared.h).
#include <cstddef>

namespace openreg {

// The device owning `ptr` (anywhere inside a segment), or -1.
int device_of(const void* ptr);
void add_segment(void* ptr, std::size_t size, int device);
void remove_segment(void* ptr);

}  // namespace openreg
