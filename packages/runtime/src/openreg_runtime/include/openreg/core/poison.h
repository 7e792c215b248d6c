#pragma once
// Allocations that a failed task wrote: reading one raises that failure again,
// as CUDA's sticky error would (per allocation here, so the device stays
// usable). A task that writes one and succeeds clears it.
//
// A task marks memory by the allocation it held when the task was launched:
// the host may free a queued task's output, and another tensor take the same
// memory, before the task runs. So a task notes `allocation_clock()` at its
// launch, and what it marks counts only for allocations made before that.
#include <cstdint>
#include <memory>

#include "openreg/core/error.h"

namespace openreg {

// How many device allocations the process has made so far.
uint64_t allocation_clock();
void poison(const void* base, uint64_t launched_at, std::shared_ptr<const AsyncError> failure);
void unpoison(const void* base, uint64_t launched_at);
// The failure that left `base` invalid, or null: one atomic load while none is.
std::shared_ptr<const AsyncError> poisoned(const void* base);
// Called by the allocator as an allocation ends.
void forget_poison(const void* base, uint64_t allocation);

}  // namespace openreg
