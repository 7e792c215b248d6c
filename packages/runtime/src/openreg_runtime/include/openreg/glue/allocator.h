#pragma once
#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>

namespace openreg::glue {

// The caching device allocator registered for PrivateUse1.
c10::DeviceAllocator* device_allocator();
c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device);
// Pinned host memory (tensor.pin_memory()).
c10::Allocator* pinned_allocator();
at::HostAllocator* pinned_host_allocator();  // the same, with its statistics
bool is_pinned(const void* ptr);

}  // namespace openreg::glue
