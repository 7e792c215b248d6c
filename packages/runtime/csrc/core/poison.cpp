#include "openreg/core/poison.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "openreg/core/memory.h"
#include "openreg/core/segments.h"

namespace openreg {
namespace {

struct Poisoned {
  uint64_t allocation;  // which tenant of the memory the failure wrote
  std::shared_ptr<const AsyncError> failure;
};

std::atomic<int> g_poisoned_count{0};
// Lock order: this, then a DeviceMemory's (allocation_at); the allocator calls
// forget_poison without holding its own.
std::mutex& g_poison_mu = *new std::mutex;
auto& g_poisoned = *new std::unordered_map<const void*, Poisoned>;

uint64_t allocation_at(const void* base) {
  const int device = device_of(base);
  return device < 0 ? 0 : device_memory(device).allocation_at(base);
}

void erase(std::unordered_map<const void*, Poisoned>::iterator it) {
  g_poisoned.erase(it);
  g_poisoned_count.store(static_cast<int>(g_poisoned.size()), std::memory_order_release);
}

}  // namespace

void poison(const void* base, uint64_t launched_at, std::shared_ptr<const AsyncError> failure) {
  if (base == nullptr) return;  // no memory (an empty tensor)
  std::lock_guard<std::mutex> lock(g_poison_mu);
  const uint64_t allocation = allocation_at(base);
  if (allocation == 0 || allocation > launched_at) return;  // freed, or another tensor's now
  g_poisoned[base] = {allocation, std::move(failure)};
  g_poisoned_count.store(static_cast<int>(g_poisoned.size()), std::memory_order_release);
}

void unpoison(const void* base, uint64_t launched_at) {
  if (g_poisoned_count.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(g_poison_mu);
  auto it = g_poisoned.find(base);
  if (it != g_poisoned.end() && it->second.allocation <= launched_at) erase(it);
}

std::shared_ptr<const AsyncError> poisoned(const void* base) {
  if (base == nullptr || g_poisoned_count.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_poison_mu);
  auto it = g_poisoned.find(base);
  if (it == g_poisoned.end() || it->second.allocation != allocation_at(base)) return nullptr;
  return it->second.failure;
}

void forget_poison(const void* base, uint64_t allocation) {
  if (g_poisoned_count.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(g_poison_mu);
  auto it = g_poisoned.find(base);
  if (it != g_poisoned.end() && it->second.allocation == allocation) erase(it);
}

}  // namespace openreg
