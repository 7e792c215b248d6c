#include "openreg/core/memory.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <string>
#include <utility>

#include "openreg/core/detail/segment_map.h"
#include "openreg/core/device.h"
#include "openreg/core/error.h"
#include "openreg/core/graph.h"
#include "openreg/core/poison.h"
#include "openreg/core/sanitizer.h"

namespace openreg {
namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kMinBlock = 512;  // CUDA's kMinBlockSize
constexpr std::size_t kSpareNodes = 64;

// A block moves between the live and the cached maps at every allocation and
// free: the emptied map node is kept (up to kSpareNodes) for the next insertion
// instead of being freed and allocated again.
template <class Map>
typename Map::mapped_type take(Map& map, typename Map::iterator it, std::vector<typename Map::node_type>& spare) {
  auto node = map.extract(it);
  auto value = std::move(node.mapped());
  if (spare.size() < kSpareNodes) spare.push_back(std::move(node));
  return value;
}

template <class Map>
void put(Map& map, typename Map::key_type key, typename Map::mapped_type value,
         std::vector<typename Map::node_type>& spare) {
  if (spare.empty()) {
    map.emplace(key, std::move(value));
    return;
  }
  auto node = std::move(spare.back());
  spare.pop_back();
  node.key() = key;
  node.mapped() = std::move(value);
  map.insert(std::move(node));
}

std::string human(std::size_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / double(1ull << 20));
  else
    std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
  return buf;
}

StatType pool_of(std::size_t size) { return size <= kSmallBlock ? StatType::SmallPool : StatType::LargePool; }

void bump(StatArray& s, std::size_t size, int64_t n) { s.update(pool_of(size), n); }

std::atomic<uint64_t> g_allocations{0};
std::atomic<bool> g_journal{false};

int stream_of(int64_t owner) { return owner >= 0 ? static_cast<int>(owner) : 0; }  // a graph pool's: none

thread_local std::array<uint64_t, 64> t_routed_pool{};  // allocate_to_pool's, by device

}  // namespace

std::size_t round_size(std::size_t nbytes) {
  return std::max(kMinBlock, (nbytes + kMinBlock - 1) / kMinBlock * kMinBlock);
}

std::size_t mapped_size(std::size_t size) { return std::max(kPage, (size + kPage - 1) / kPage * kPage); }

uint64_t allocation_clock() { return g_allocations.load(std::memory_order_relaxed); }

void journal_segments(bool on) { g_journal.store(on, std::memory_order_relaxed); }

DeviceMemory& device_memory(int device) {
  check_device(device);
  static auto* memories = [] {
    auto* v = new std::vector<std::unique_ptr<DeviceMemory>>();
    for (int i = 0; i < device_count(); ++i) v->push_back(std::make_unique<DeviceMemory>(i));
    return v;
  }();
  return *(*memories)[device];
}

std::vector<DeviceMemory::BlockInfo> DeviceMemory::blocks() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<BlockInfo> out;
  for (const auto& [ptr, b] : live_) out.push_back({b->ptr, b->size, b->requested, b->stream, BlockInfo::kLive});
  for (const auto& b : pending_) out.push_back({b->ptr, b->size, b->requested, b->stream, BlockInfo::kPendingFree});
  for (const auto& [owner, pool] : cached_) {
    for (const auto& [size, b] : pool) out.push_back({b->ptr, b->size, b->requested, b->stream, BlockInfo::kCached});
  }
  return out;
}

std::size_t DeviceMemory::capacity() const { return config().memory_bytes; }

void DeviceMemory::set_fraction(double fraction) {
  if (!(fraction >= 0.0 && fraction <= 1.0)) {
    throw Error("invalid memory fraction " + std::to_string(fraction) + ": it must be between 0 and 1");
  }
  fraction_.store(fraction, std::memory_order_relaxed);
}

std::size_t DeviceMemory::reserved() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_.reserved_bytes[StatType::Aggregate].current;
}

void DeviceMemory::count_alloc(const Block& b, bool add) {
  int64_t sign = add ? 1 : -1;
  bump(stats_.allocation, b.size, sign);
  bump(stats_.active, b.size, sign);
  bump(stats_.allocated_bytes, b.size, sign * int64_t(b.size));
  bump(stats_.active_bytes, b.size, sign * int64_t(b.size));
  bump(stats_.requested_bytes, b.size, sign * int64_t(b.requested));
}

void DeviceMemory::count_inactive(const Block& b, int64_t sign, bool the_block) {
  const std::size_t rest = mapped_size(b.size) - b.size;
  if (rest == 0) return;  // a segment of whole pages holds the block alone: not split
  bump(stats_.inactive_split, b.size, sign);
  bump(stats_.inactive_split_bytes, b.size, sign * int64_t(the_block ? b.size : rest));
}

void DeviceMemory::process_pending() {
  auto done = std::partition(pending_.begin(), pending_.end(), [this](const std::unique_ptr<Block>& b) {
    return !std::all_of(b->pending.begin(), b->pending.end(), [](const Event& e) { return e.query(); }) ||
           (b->after != 0 && !get_stream(device_, static_cast<int>(b->stream)).reached(b->after));
  });
  for (auto it = done; it != pending_.end(); ++it) {
    Block& b = **it;
    b.pending.clear();
    b.after = 0;
    b.other_streams.clear();
    bump(stats_.active, b.size, -1);
    bump(stats_.active_bytes, b.size, -int64_t(b.size));
    cache(std::move(*it));
  }
  pending_.erase(done, pending_.end());
}

void* DeviceMemory::take_cached(std::size_t size, std::size_t requested, Owner owner, bool any_larger) {
  auto pool = cached_.find(owner);
  if (pool == cached_.end()) return nullptr;
  // Best fit, but never more than a quarter larger (a small tensor must not
  // pin a large block) unless nothing else can serve it.
  auto it = pool->second.lower_bound(size);
  if (it == pool->second.end() || (!any_larger && it->first > size + size / 4)) return nullptr;
  std::unique_ptr<Block> b = take(pool->second, it, spare_cached_);
  count_inactive(*b, -1, true);
  b->requested = requested;
  count_alloc(*b, true);
  void* p = b->ptr;
  make_live(std::move(b));
  return p;
}

void DeviceMemory::make_live(std::unique_ptr<Block> b) {
  void* ptr = b->ptr;  // read before the call, as in cache()
  b->allocation = g_allocations.fetch_add(1, std::memory_order_relaxed) + 1;
  put(live_, ptr, std::move(b), spare_live_);
}

void DeviceMemory::cache(std::unique_ptr<Block> b) {
  // Read before the call: the arguments may be evaluated in any order.
  const std::size_t size = b->size;
  count_inactive(*b, 1, true);
  Pool& pool = cached_[b->stream];
  put(pool, size, std::move(b), spare_cached_);
}

void DeviceMemory::unmap(const Block& b) {
  if (sanitizer::on()) sanitizer::unmapped(b.ptr);
  const std::size_t mapped = mapped_size(b.size);
  detail::unmap_segment(b.ptr, mapped);
  if (g_journal.load(std::memory_order_relaxed)) {
    notes_.push_back({SegmentNote::kUnmapped, reinterpret_cast<uintptr_t>(b.ptr), mapped, stream_of(b.stream)});
  }
  count_inactive(b, -1, false);
  bump(stats_.segment, b.size, -1);
  bump(stats_.reserved_bytes, b.size, -int64_t(mapped));
  ++stats_.num_device_free;
}

void DeviceMemory::release_cached(uint64_t only) {
  for (auto& [owner, pool] : cached_) {
    if (only != 0 && owner != -static_cast<Owner>(only)) continue;
    if (owner < 0 && pool_users_.count(static_cast<uint64_t>(-owner)) != 0) continue;  // its graphs replay into them
    for (auto& [size, b] : pool) {
      count_inactive(*b, -1, true);
      unmap(*b);
    }
    pool.clear();
  }
}

void DeviceMemory::use_pool(uint64_t pool) {
  std::lock_guard<std::mutex> lock(mu_);
  ++pool_users_[pool];
}

void DeviceMemory::release_pool(uint64_t pool) {
  std::lock_guard<std::mutex> lock(mu_);
  auto users = pool_users_.find(pool);
  if (users != pool_users_.end() && --users->second == 0) {
    pool_users_.erase(users);
    lent_on_oom_.erase(std::remove(lent_on_oom_.begin(), lent_on_oom_.end(), pool), lent_on_oom_.end());
  }
}

void DeviceMemory::lend_on_oom(uint64_t pool) {
  std::lock_guard<std::mutex> lock(mu_);
  lent_on_oom_.push_back(pool);
}

int DeviceMemory::pool_users(uint64_t pool) {
  std::lock_guard<std::mutex> lock(mu_);
  auto users = pool_users_.find(pool);
  return users == pool_users_.end() ? 0 : users->second;
}

void* DeviceMemory::malloc(std::size_t nbytes, int stream) {
  check_not_forked();
  const std::size_t size = round_size(nbytes), mapped = mapped_size(size);
  uint64_t pool = t_routed_pool[device_];
  if (pool == 0) pool = capture_pool(get_stream(device_, stream));
  const Owner owner = pool != 0 ? -static_cast<Owner>(pool) : stream;
  // The retry waits for the device, which a capture forbids: CUDA's allocator, which then skips freeing its
  // cache, raises its out-of-memory error at once, and so does this one.
  const bool may_drain = !capture_underway();
  for (int attempt = 0;; ++attempt) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      process_pending();
      if (void* p = take_cached(size, nbytes, owner)) return p;
      // Cached blocks may still be used by queued work until the device has
      // drained, so the cache is released only on the retry.
      if (attempt > 0) release_cached();
      const auto limit = static_cast<std::size_t>(fraction() * static_cast<double>(capacity()));
      if (stats_.reserved_bytes[StatType::Aggregate].current + mapped <= limit) {
        void* p = detail::map_segment(mapped, device_);
        if (p != nullptr) {
          auto b = std::make_unique<Block>(Block{p, size, nbytes, owner, 0, {}});
          bump(stats_.segment, size, 1);
          bump(stats_.reserved_bytes, size, int64_t(mapped));
          count_inactive(*b, 1, false);
          ++stats_.num_device_alloc;
          if (g_journal.load(std::memory_order_relaxed)) {
            notes_.push_back({SegmentNote::kMapped, reinterpret_cast<uintptr_t>(p), mapped, stream});
          }
          count_alloc(*b, true);
          make_live(std::move(b));
          return p;
        }
      }
      if (attempt > 0 || !may_drain) {
        // Nothing else can serve it: a larger cached block of its own pool (CUDA would split one), then a lender's.
        if (void* p = take_cached(size, nbytes, owner, /*any_larger=*/true)) return p;
        for (uint64_t lender : lent_on_oom_) {
          if (-static_cast<Owner>(lender) == owner || pool_users_.count(lender) == 0) continue;
          // CUDA splits a lender's larger block; this allocator does not split, and lends it whole.
          if (void* p = take_cached(size, nbytes, -static_cast<Owner>(lender), /*any_larger=*/true)) return p;
        }
        ++stats_.num_ooms;
        if (g_journal.load(std::memory_order_relaxed)) {
          const std::size_t reserved = stats_.reserved_bytes[StatType::Aggregate].current;
          notes_.push_back({SegmentNote::kOutOfMemory, limit > reserved ? limit - reserved : 0, nbytes, stream});
        }
        throw OutOfMemory("openreg:" + std::to_string(device_) + " is out of memory: tried to allocate " +
                          human(nbytes) + "; " + human(stats_.allocated_bytes[StatType::Aggregate].current) +
                          " is allocated by tensors and " + human(stats_.reserved_bytes[StatType::Aggregate].current) +
                          " reserved in total, of " +
                          (fraction() < 1.0 ? human(limit) + " this process may use (set_per_process_memory_fraction(" +
                                                  std::to_string(fraction()) + ") of a capacity of " +
                                                  human(capacity()) + "). Free some tensors, or raise the fraction."
                                            : "a capacity of " + human(capacity()) +
                                                  ". Free some tensors, or raise the capacity with "
                                                  "OPENREG_DEVICE_MEMORY (e.g. 16GiB)."));
      }
      ++stats_.num_alloc_retries;
      ++stats_.num_sync_all_streams;
    }
    // Blocks freed while work is still queued may be in use by it: let the
    // device drain (without holding the lock, since tasks free memory) before
    // releasing them.
    synchronize_device(device_);
  }
}

void DeviceMemory::free(void* ptr) {
  if (ptr == nullptr || in_bad_fork()) return;  // a forked child only leaks
  uint64_t allocation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;
    allocation = it->second->allocation;
    release(take(live_, it, spare_live_));
  }
  forget_poison(ptr, allocation);
  if (sanitizer::on()) sanitizer::freed(ptr);
}

uint64_t DeviceMemory::allocation_at(const void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(const_cast<void*>(ptr));
  return it == live_.end() ? 0 : it->second->allocation;
}

// What free() does to a block no longer live, under mu_.
void DeviceMemory::release(std::unique_ptr<Block> b) {
  bump(stats_.allocation, b->size, -1);
  bump(stats_.allocated_bytes, b->size, -int64_t(b->size));
  bump(stats_.requested_bytes, b->size, -int64_t(b->requested));
  // Freed while another thread holds its stream (Stream::InOrder), a block may still be used by work launched
  // meanwhile, which runs after the holder's: the holder must not be given it before that work has run.
  if (b->stream >= 0) {
    const Stream& stream = get_stream(device_, static_cast<int>(b->stream));
    if (stream.held_by_another_thread()) b->after = stream.last();
  }
  if (!b->other_streams.empty() || b->after != 0) {
    for (Stream* s : b->other_streams) {
      Event e;
      e.record(*s);
      b->pending.push_back(std::move(e));
    }
    pending_.push_back(std::move(b));  // still active until the events pass
    return;
  }
  bump(stats_.active, b->size, -1);
  bump(stats_.active_bytes, b->size, -int64_t(b->size));
  cache(std::move(b));
}

void DeviceMemory::record_stream(void* ptr, Stream& stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    throw Error("record_stream: the pointer is not the start of a live openreg allocation on openreg:" +
                std::to_string(device_));
  }
  // As CUDA's, a stream of another device is taken too: the block waits for it as for its own device's.
  std::vector<Stream*>& others = it->second->other_streams;
  const bool own = stream.device() == device_ && stream.id() == it->second->stream;
  if (!own && std::find(others.begin(), others.end(), &stream) == others.end()) others.push_back(&stream);
}

void DeviceMemory::empty_cache(uint64_t pool) {
  synchronize_device(device_);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.num_sync_all_streams;  // as CUDA's, whose empty_cache() waits for every stream too
  process_pending();
  release_cached(pool);
}

uint64_t allocate_to_pool(int device, uint64_t pool) {
  check_device(device);
  return std::exchange(t_routed_pool[device], pool);
}

std::vector<SegmentNote> DeviceMemory::take_notes() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(notes_, {});
}

MemoryStats DeviceMemory::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void DeviceMemory::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.reset_peak();
}

void DeviceMemory::reset_accumulated() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.reset_accumulated();
}

}  // namespace openreg
