#pragma once
// Device memory: host memory owned by the runtime (so kernels work on it in
// place), a per-device capacity, and a stream-aware caching allocator with
// CUDA-style statistics. Where each allocation lives is in segments.h, strict
// mode's protection of it in strict.h.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "openreg/core/stream.h"

namespace openreg {

struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(int64_t n);
  void decrease(int64_t n);
};

// Which blocks a statistic counts, as c10's StatType: all of them, or one
// pool's (the small pool holds blocks up to 1 MiB).
enum class StatType { Aggregate, SmallPool, LargePool };
constexpr std::size_t kStatTypes = 3;

struct StatArray {
  std::array<Stat, kStatTypes> by_type;
  Stat& operator[](StatType type) { return by_type[static_cast<std::size_t>(type)]; }
  const Stat& operator[](StatType type) const { return by_type[static_cast<std::size_t>(type)]; }
  // Adds `n` (removes, when negative) to the aggregate and to `pool`.
  void update(StatType pool, int64_t n);
};

struct MemoryStats {
  StatArray allocation, segment, active, allocated_bytes, reserved_bytes, active_bytes, requested_bytes;
  // A segment is one block and the rest of its last page, which the memory
  // snapshot shows as an inactive block beside it: these count the inactive
  // blocks of such split segments, as CUDA's count those of its split ones.
  StatArray inactive_split, inactive_split_bytes;
  int64_t num_alloc_retries = 0, num_ooms = 0, num_sync_all_streams = 0, num_device_alloc = 0, num_device_free = 0;
  void reset_peak();
  void reset_accumulated();
};

// What the allocator did beyond handing out and taking back blocks, for the
// memory history (torch.cuda's trace entries segment_alloc, segment_free and
// oom). Noted only while journal_segments(true); the history takes the notes
// after the allocator's lock is released, since it gathers Python stacks
// (which may wait for the GIL).
struct SegmentNote {
  enum Kind { kMapped, kUnmapped, kOutOfMemory } kind;
  uintptr_t addr;    // kOutOfMemory: the bytes this process could still reserve
  std::size_t size;  // kOutOfMemory: the bytes asked for
  int stream;
};
void journal_segments(bool on);

class DeviceMemory {
 public:
  explicit DeviceMemory(int device) : device_(device) {}
  // Memory for use on stream `stream`; throws OutOfMemory past the capacity
  // after synchronising and releasing the cache once. While `stream` captures
  // a graph, the memory comes from the graph's pool.
  void* malloc(std::size_t nbytes, int stream);
  // A graph's pool (graph.h) is used by one more graph, or one fewer. Its
  // blocks are reused only by allocations for its graphs, and are kept while
  // one uses it (replays write into them, freed or not); then, as other
  // cached blocks, empty_cache() gives them back once the device has drained
  // (a replay still queued may write into them).
  void use_pool(uint64_t pool);
  void release_pool(uint64_t pool);
  // How many users `pool` has (graphs, memory pools, routings to it).
  int pool_users(uint64_t pool);
  // An allocation outside `pool` that finds the device out of memory may take
  // a block the pool has cached while the pool is in use (MemPool(use_on_oom)).
  void lend_on_oom(uint64_t pool);
  void free(void* ptr);
  // `ptr` is also used on `stream`: it is not reused until that stream's
  // work queued so far has run.
  void record_stream(void* ptr, Stream& stream);
  // Synchronises the device and returns the cached blocks to the host: every
  // one but those of pools in use, or, given a pool, that pool's if unused.
  void empty_cache(uint64_t pool = 0);
  MemoryStats stats();
  // Every block the allocator holds, live or cached (each in a segment of its
  // own, mapped_size(size) long: openreg splits no segment), for memory snapshots.
  struct BlockInfo {
    void* ptr;
    std::size_t size, requested;
    int64_t owner;                                      // the stream it serves; a graph pool's as -pool
    enum State { kLive, kPendingFree, kCached } state;  // pending: freed, other streams still use it
  };
  std::vector<BlockInfo> blocks();
  void reset_peak();
  void reset_accumulated();
  std::size_t capacity() const;
  // The share of the capacity this process may reserve (torch.cuda's
  // set_per_process_memory_fraction); allocations past it raise OutOfMemory.
  void set_fraction(double fraction);
  double fraction() const { return fraction_.load(std::memory_order_relaxed); }
  std::size_t reserved();
  // Which allocation `ptr` (the start of one) is, in allocation_clock()'s
  // numbering; 0 when it is not live.
  uint64_t allocation_at(const void* ptr);
  // The notes made since the last call (see SegmentNote).
  std::vector<SegmentNote> take_notes();

 private:
  // What a cached block is kept for: a stream's id, or a graph pool's as -pool.
  using Owner = int64_t;
  struct Block {
    void* ptr;
    std::size_t size;
    std::size_t requested;
    Owner stream;
    uint64_t allocation = 0;             // allocation_clock() when it was handed out
    std::vector<Stream*> other_streams;  // streams recorded with record_stream, of any device
    std::vector<Event> pending;          // events to pass before the block is free
    uint64_t after = 0;                  // work of its stream to run first: freed while another thread held it
  };
  void* take_cached(std::size_t size, std::size_t requested, Owner owner, bool any_larger = false);
  void process_pending();
  void release_cached(uint64_t pool = 0);
  void count_alloc(const Block& b, bool add);
  // Adds (sign 1) or removes an inactive block of `b`'s segment: `b` itself, or the rest of its last page.
  void count_inactive(const Block& b, int64_t sign, bool the_block);
  using Live = std::unordered_map<void*, std::unique_ptr<Block>>;
  using Pool = std::multimap<std::size_t, std::unique_ptr<Block>>;
  void make_live(std::unique_ptr<Block> b);
  void release(std::unique_ptr<Block> b);
  void cache(std::unique_ptr<Block> b);
  void unmap(const Block& b);

  const int device_;
  std::atomic<double> fraction_{1.0};
  std::mutex mu_;
  Live live_;
  std::map<Owner, Pool> cached_;
  std::map<uint64_t, int> pool_users_;  // pools in use, and by how many users
  std::vector<uint64_t> lent_on_oom_;   // lend_on_oom's pools
  // Map nodes taken out of live_ and cached_, reused for the next insertion.
  std::vector<Live::node_type> spare_live_;
  std::vector<Pool::node_type> spare_cached_;
  std::vector<std::unique_ptr<Block>> pending_;
  std::vector<SegmentNote> notes_;
  MemoryStats stats_;
};

DeviceMemory& device_memory(int device);

// The allocations the calling thread makes on `device` come from `pool` (any
// pool id; 0: as usual, the stream's or its graph capture's) until it is
// changed: torch.cuda.use_mem_pool's routing. Returns the pool routed to before.
uint64_t allocate_to_pool(int device, uint64_t pool);
// The largest block of the small pool (statistics count blocks in two pools, as CUDA's).
constexpr std::size_t kSmallBlock = 1 << 20;
// The size of the block a request gets, which the statistics count: CUDA's
// rounding, up to a multiple of 512 bytes.
std::size_t round_size(std::size_t nbytes);
// The memory mapped for a block (its segment): whole pages, so that strict
// mode can protect it.
std::size_t mapped_size(std::size_t size);

}  // namespace openreg
