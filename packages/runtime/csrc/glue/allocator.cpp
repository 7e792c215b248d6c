// c10 allocators for openreg: the caching device allocator (statistics and
// record_stream come from the core) and a pinned host allocator.
#include "openreg/glue/allocator.h"

#include <ATen/core/CachingHostAllocator.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "openreg/core/device.h"
#include "openreg/core/memory.h"
#include "openreg/core/segments.h"
#include "openreg/glue/launch.h"
#include "openreg/glue/memory_history.h"

namespace openreg::glue {
namespace {

void delete_device_memory(void* ptr) {
  if (history::recording()) history::on_free(ptr);
  int device = device_of(ptr);
  if (device >= 0) device_memory(device).free(ptr);
}

// What tensors' memory is freed with: one deleter per device, so that freeing
// does not look up which device owns the pointer (a lock and a search).
template <int D>
void delete_on_device(void* ptr) {
  if (history::recording()) history::on_free(ptr);
  device_memory(D).free(ptr);
}

template <int... D>
constexpr std::array<at::DeleterFnPtr, sizeof...(D)> deleters(std::integer_sequence<int, D...>) {
  return {&delete_on_device<D>...};
}

constexpr auto kDeleters = deleters(std::make_integer_sequence<int, kMaxDevices>());

void copy_stat(const StatArray& from, c10::CachingAllocator::StatArray& to) {
  using Theirs = c10::CachingAllocator::StatType;
  static constexpr std::pair<StatType, Theirs> kTypes[] = {
      {StatType::Aggregate, Theirs::AGGREGATE},
      {StatType::SmallPool, Theirs::SMALL_POOL},
      {StatType::LargePool, Theirs::LARGE_POOL},
  };
  for (auto [ours, theirs] : kTypes) {
    auto& stat = to[static_cast<std::size_t>(theirs)];
    stat.current = from[ours].current;
    stat.peak = from[ours].peak;
    stat.allocated = from[ours].allocated;
    stat.freed = from[ours].freed;
  }
}

struct DeviceAllocator final : c10::DeviceAllocator {
  at::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex device = static_cast<c10::DeviceIndex>(current_device());
    c10::Device where(c10::DeviceType::PrivateUse1, device);
    if (nbytes == 0) return {nullptr, nullptr, &delete_device_memory, where};
    const int stream = checked([&] { return openreg::current_stream(device).id(); });
    void* p = nullptr;
    try {
      p = checked([&] { return device_memory(device).malloc(nbytes, stream); });
    } catch (const c10::OutOfMemoryError&) {
      if (history::recording()) history::note_segments(device);
      throw;
    }
    if (history::recording()) history::on_alloc(device, p, round_size(nbytes), stream);
    return {p, p, kDeleters[device], where};
  }

  at::DeleterFnPtr raw_deleter() const override { return &delete_device_memory; }

  // Storage-level copies (e.g. UntypedStorage.clone) go through the stream so
  // they stay ordered with kernels.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    c10::DeviceIndex device = static_cast<c10::DeviceIndex>(device_of(dest));
    uint64_t seq =
        launch(device, "storage copy", {Touch(dest, /*write=*/true), src}, [=] { std::memcpy(dest, src, count); });
    wait(device, seq);
  }

  bool initialized() override { return true; }

  void emptyCache(c10::MempoolId_t) override {
    checked([] {
      for (int d = 0; d < device_count(); ++d) device_memory(d).empty_cache();
    });
    if (history::recording()) {
      for (int d = 0; d < device_count(); ++d) history::note_segments(d);
    }
  }

  void recordStream(const at::DataPtr& ptr, c10::Stream stream) override {
    if (ptr.get() == nullptr) return;
    checked([&] { device_memory(ptr.device().index()).record_stream(ptr.get(), core_stream(stream)); });
  }

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return device_stats(device);
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    checked([&] { device_memory(device).reset_accumulated(); });
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    checked([&] { device_memory(device).reset_peak(); });
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return checked([&] {
      auto& m = device_memory(device);
      return std::make_pair(m.capacity() - m.reserved(), m.capacity());
    });
  }
};

DeviceAllocator g_device_allocator;  // stateless, so safe to use during exit

// Page-aligned host memory that copies may use asynchronously. Copies keep
// their host tensor alive until they have run, so there is nothing to cache
// or to record events for.
struct PinnedAllocator final : at::HostAllocator {
  at::DataPtr allocate(size_t nbytes) override {
    void* p = nullptr;
    if (nbytes > 0) {
      TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&p, 4096, nbytes) == 0, "openreg could not allocate ", nbytes,
                       " bytes of pinned host memory");
      std::lock_guard<std::mutex> lock(mu);
      live[reinterpret_cast<std::uintptr_t>(p)] = nbytes;
      count(nbytes, +1);
    }
    return {p, p, &release, at::DeviceType::CPU};
  }

  static void release(void* p);
  at::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mu);
    return stats;
  }
  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mu);
    for (auto* stat : {&stats.active_requests, &stats.allocations, &stats.active_bytes, &stats.allocated_bytes}) {
      stat->reset_accumulated();
    }
    // CUDA's counts of host allocations and frees are accumulated too.
    stats.host_alloc_time.reset_accumulated();
    stats.host_free_time.reset_accumulated();
    stats.num_host_alloc = stats.num_host_free = 0;
  }
  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mu);
    for (auto* stat : {&stats.active_requests, &stats.allocations, &stats.active_bytes, &stats.allocated_bytes}) {
      stat->reset_peak();
    }
  }

  // Nothing is cached: every block is active while it lives.
  void count(size_t nbytes, int sign) {
    for (auto* stat : {&stats.active_requests, &stats.allocations}) sign > 0 ? stat->increase(1) : stat->decrease(1);
    for (auto* stat : {&stats.active_bytes, &stats.allocated_bytes}) {
      sign > 0 ? stat->increase(static_cast<int64_t>(nbytes)) : stat->decrease(static_cast<int64_t>(nbytes));
    }
    ++(sign > 0 ? stats.num_host_alloc : stats.num_host_free);
  }

  bool contains(const void* ptr) {
    auto p = reinterpret_cast<std::uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.upper_bound(p);
    if (it == live.begin()) return false;
    --it;
    return p < it->first + it->second;
  }

  std::mutex mu;
  std::map<std::uintptr_t, size_t> live;
  at::HostStats stats;
};

// Never destroyed: pinned tensors may be freed during exit.
PinnedAllocator& g_pinned_allocator = *new PinnedAllocator;

void PinnedAllocator::release(void* p) {
  if (p == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_pinned_allocator.mu);
    auto it = g_pinned_allocator.live.find(reinterpret_cast<std::uintptr_t>(p));
    if (it != g_pinned_allocator.live.end()) {
      g_pinned_allocator.count(it->second, -1);
      g_pinned_allocator.live.erase(it);
    }
  }
  std::free(p);
}

}  // namespace

c10::DeviceAllocator* device_allocator() { return &g_device_allocator; }

c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device) {
  MemoryStats s = checked([&] { return device_memory(device).stats(); });
  c10::CachingDeviceAllocator::DeviceStats out;
  copy_stat(s.allocation, out.allocation);
  copy_stat(s.segment, out.segment);
  copy_stat(s.active, out.active);
  copy_stat(s.allocated_bytes, out.allocated_bytes);
  copy_stat(s.reserved_bytes, out.reserved_bytes);
  copy_stat(s.active_bytes, out.active_bytes);
  copy_stat(s.requested_bytes, out.requested_bytes);
  copy_stat(s.inactive_split, out.inactive_split);
  copy_stat(s.inactive_split_bytes, out.inactive_split_bytes);
  out.num_alloc_retries = s.num_alloc_retries;
  out.num_ooms = s.num_ooms;
  out.num_sync_all_streams = s.num_sync_all_streams;
  out.num_device_alloc = s.num_device_alloc;
  out.num_device_free = s.num_device_free;
  return out;
}

c10::Allocator* pinned_allocator() { return &g_pinned_allocator; }
at::HostAllocator* pinned_host_allocator() { return &g_pinned_allocator; }

void check_not_pinned(std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false),
              "Only dense CPU tensors can be pinned: pin_memory=True asks for page-locked host memory, which an "
              "openreg tensor is not; drop it, or make the tensor on the CPU and pin it there.");
}
bool is_pinned(const void* ptr) { return g_pinned_allocator.contains(ptr); }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);
REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_pinned_allocator);

}  // namespace openreg::glue
