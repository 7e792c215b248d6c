#pragma once
// Allocations that a failed task wrote: reading one raises that failure again,
// as CUDA's sticky error would (per allocation here, so the device stays
// usable). A task that writes one and succeeds, or freeing it, clears it.
#include <memory>

#include "openreg/core/error.h"

namespace openreg {

void poison(const void* base, std::shared_ptr<const AsyncError> failure);
// The failure that left `base` invalid, or null: one atomic load while none is.
std::shared_ptr<const AsyncError> poisoned(const void* base);
void unpoison(const void* base);

}  // namespace openreg
