#pragma once
// Device memory: host memory owned by the runtime (so kernels work on it in
// place), a per-device capacity, a stream-aware caching allocator with
// CUDA-style statistics, and strict mode's page protection.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "openreg/core/error.h"
#include "openreg/core/poison.h"
#include "openreg/core/stream.h"

namespace openreg {

struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(int64_t n);
  void decrease(int64_t n);
};

// Index 0 aggregates; 1 is the small pool (blocks up to 1 MiB), 2 the large.
using StatArray = Stat[3];

struct MemoryStats {
  StatArray allocation, segment, active, allocated_bytes, reserved_bytes,
      active_bytes, requested_bytes;
  int64_t num_alloc_retries = 0, num_ooms = 0, num_sync_all_streams = 0,
          num_device_alloc = 0, num_device_free = 0;
};

class DeviceMemory {
 public:
  explicit DeviceMemory(int device) : device_(device) {}
  // Memory for use on stream `stream`; throws OutOfMemory past the capacity
  // after synchronising and releasing the cache once.
  void* malloc(std::size_t nbytes, int stream);
  void free(void* ptr);
  // `ptr` is also used on `stream`: it is not reused until that stream's
  // work queued so far has run.
  void record_stream(void* ptr, int stream);
  // Synchronises the device and returns every cached block to the host.
  void empty_cache();
  MemoryStats stats();
  void reset_peak();
  void reset_accumulated();
  std::size_t capacity() const;
  std::size_t reserved();
  // Which allocation `ptr` (the start of one) is, in allocation_clock()'s
  // numbering; 0 when it is not live.
  uint64_t allocation_at(const void* ptr);

 private:
  struct Block {
    void* ptr;
    std::size_t size;
    std::size_t requested;
    int stream;
    uint64_t allocation = 0;  // allocation_clock() when it was handed out
    uint64_t other_streams;  // bitmask of streams recorded with record_stream
    std::vector<Event> pending;  // events to pass before the block is free
  };
  void* take_cached(std::size_t size, std::size_t requested, int stream);
  void process_pending();
  void release_cached();
  void* map_segment(std::size_t size);
  void unmap_segment(void* ptr, std::size_t size);
  void count_alloc(const Block& b, bool add);
  using Live = std::unordered_map<void*, std::unique_ptr<Block>>;
  using Pool = std::multimap<std::size_t, std::unique_ptr<Block>>;
  void make_live(std::unique_ptr<Block> b);
  void release(std::unique_ptr<Block> b);
  void cache(std::unique_ptr<Block> b);

  const int device_;
  std::mutex mu_;
  Live live_;
  std::map<int, Pool> cached_;
  // Map nodes taken out of live_ and cached_, reused for the next insertion.
  std::vector<Live::node_type> spare_live_;
  std::vector<Pool::node_type> spare_cached_;
  std::vector<std::unique_ptr<Block>> pending_;
  MemoryStats stats_;
};

DeviceMemory& device_memory(int device);
// Size a request is rounded to (whole pages, so strict mode can protect it).
std::size_t round_size(std::size_t nbytes);
// The device owning `ptr` (anywhere inside an allocation), or -1.
int device_of(const void* ptr);
// Memory of a device that the allocator does not own (shared.h): known to
// device_of and to strict mode's protection like the allocator's.
void add_segment(void* ptr, std::size_t size, int device);
void remove_segment(void* ptr);

// Makes device memory host-accessible for a kernel's or copy's duration in
// strict mode (OPENREG_STRICT=1); costs nothing otherwise.
// Strict mode's faults say why: a SIGSEGV handler that recognises device
// memory writes which allocation the host touched and how to find the access,
// then hands the fault on (to the previous handler, e.g. Python's faulthandler,
// or the default action), so debuggers and core dumps still see it. Other
// faults pass through untouched. Installed once.
void install_fault_report();

class HostAccess {
 public:
  HostAccess(std::initializer_list<const void*> ptrs) : HostAccess(ptrs.begin(), ptrs.size()) {}
  HostAccess(const void* const* ptrs, std::size_t n);
  ~HostAccess();
  HostAccess(const HostAccess&) = delete;
  HostAccess& operator=(const HostAccess&) = delete;

 private:
  std::vector<std::uintptr_t> segments_;
};

}  // namespace openreg
