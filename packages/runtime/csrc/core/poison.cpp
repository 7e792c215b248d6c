#include "openreg/core/poison.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace openreg {

namespace {

std::atomic<int> g_poisoned_count{0};
std::mutex& g_poison_mu = *new std::mutex;
auto& g_poisoned = *new std::unordered_map<const void*, std::shared_ptr<const AsyncError>>;

}  // namespace

void poison(const void* base, std::shared_ptr<const AsyncError> failure) {
  std::lock_guard<std::mutex> lock(g_poison_mu);
  g_poisoned[base] = std::move(failure);
  g_poisoned_count.store(static_cast<int>(g_poisoned.size()), std::memory_order_release);
}

std::shared_ptr<const AsyncError> poisoned(const void* base) {
  if (g_poisoned_count.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(g_poison_mu);
  auto it = g_poisoned.find(base);
  return it == g_poisoned.end() ? nullptr : it->second;
}

void unpoison(const void* base) {
  if (g_poisoned_count.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(g_poison_mu);
  g_poisoned.erase(base);
  g_poisoned_count.store(static_cast<int>(g_poisoned.size()), std::memory_order_release);
}

}  // namespace openreg
