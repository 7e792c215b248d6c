#pragma once
#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <optional>

namespace openreg::glue {

// The caching device allocator registered for PrivateUse1.
c10::DeviceAllocator* device_allocator();
c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device);
// Pinned host memory (tensor.pin_memory()).
c10::Allocator* pinned_allocator();
at::HostAllocator* pinned_host_allocator();  // the same, with its statistics
bool is_pinned(const void* ptr);
// CUDA's check and words: a device factory asking for pinned (host) memory is
// refused, not ignored.
void check_not_pinned(std::optional<bool> pin_memory);

}  // namespace openreg::glue
