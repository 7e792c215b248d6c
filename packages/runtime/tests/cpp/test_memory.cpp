// The caching allocator: statistics, reuse, the OOM retry and record_stream.
#include <cstdlib>
#include <cstring>
#include <thread>

#include "check.h"
#include "openreg/core/error.h"
#include "openreg/core/memory.h"
#include "openreg/core/segments.h"
#include "openreg/core/stream.h"

using namespace openreg;

constexpr std::size_t kMiB = 1 << 20;

int64_t current(const StatArray& stat, StatType type = StatType::Aggregate) { return stat[type].current; }

TEST(statistics_count_blocks_per_pool) {
  DeviceMemory& memory = device_memory(0);
  memory.empty_cache();
  void* small = memory.malloc(1000, 0);
  void* large = memory.malloc(2 * kMiB, 0);
  MemoryStats s = memory.stats();
  CHECK(current(s.allocated_bytes) == int64_t(1024 + 2 * kMiB));  // blocks rounded to 512 bytes, as CUDA's
  CHECK(current(s.allocated_bytes, StatType::SmallPool) == 1024);
  CHECK(current(s.allocated_bytes, StatType::LargePool) == int64_t(2 * kMiB));
  CHECK(current(s.requested_bytes) == int64_t(1000 + 2 * kMiB));
  CHECK(current(s.allocation) == 2);
  CHECK(current(s.segment, StatType::LargePool) == 1);
  memory.free(small);
  memory.free(large);
  s = memory.stats();
  CHECK(current(s.allocated_bytes) == 0);
  CHECK(current(s.reserved_bytes) == int64_t(4096 + 2 * kMiB));  // cached, mapped in whole pages
  CHECK(s.allocated_bytes[StatType::Aggregate].peak == int64_t(1024 + 2 * kMiB));
  memory.reset_peak();
  CHECK(memory.stats().allocated_bytes[StatType::Aggregate].peak == 0);
  memory.empty_cache();
  CHECK(current(memory.stats().reserved_bytes) == 0);
}

TEST(a_freed_block_is_reused_on_its_stream) {
  DeviceMemory& memory = device_memory(0);
  void* p = memory.malloc(8192, 0);
  memory.free(p);
  const int64_t mapped = memory.stats().num_device_alloc;
  void* q = memory.malloc(8000, 0);
  CHECK(q == p);
  CHECK(memory.stats().num_device_alloc == mapped);
  void* other = memory.malloc(8000, 1);  // another stream's pool
  CHECK(other != p);
  memory.free(q);
  memory.free(other);
}

TEST(device_of_finds_the_device_inside_an_allocation) {
  void* p = device_memory(1).malloc(3 * 4096, 0);
  CHECK(device_of(p) == 1);
  CHECK(device_of(static_cast<char*>(p) + 3 * 4096 - 1) == 1);
  int host = 0;
  CHECK(device_of(&host) == -1);
  device_memory(1).free(p);
}

TEST(an_allocation_past_the_capacity_succeeds_once_the_cache_is_emptied) {
  DeviceMemory& memory = device_memory(0);
  memory.empty_cache();
  const MemoryStats before = memory.stats();
  void* a = memory.malloc(40 * kMiB, 0);
  // Queued work may still use a freed block: the retry must let it finish first.
  Gate gate;
  std::atomic<bool> finished{false};
  get_stream(0, 0).launch("blocked", gate.waiter());
  get_stream(0, 0).launch("last use", [&finished] { finished = true; });
  memory.free(a);  // cached on stream 0, where a stream-1 allocation cannot take it
  std::thread opener([gate] {
    sleep_ms(20);
    gate.open();
  });
  void* b = memory.malloc(40 * kMiB, 1);
  opener.join();
  CHECK(finished);
  const MemoryStats after = memory.stats();
  CHECK(after.num_alloc_retries == before.num_alloc_retries + 1);
  CHECK(after.num_sync_all_streams == before.num_sync_all_streams + 1);
  CHECK(after.num_device_free == before.num_device_free + 1);
  CHECK(after.num_ooms == before.num_ooms);
  CHECK(current(after.reserved_bytes) == int64_t(40 * kMiB));
  memory.free(b);
}

TEST(an_allocation_past_the_capacity_raises_out_of_memory_and_the_device_goes_on) {
  DeviceMemory& memory = device_memory(0);
  const int64_t ooms = memory.stats().num_ooms;
  bool raised = false;
  try {
    memory.malloc(100 * kMiB, 0);
  } catch (const OutOfMemory& e) {
    raised = true;
    CHECK(std::strstr(e.what(), "openreg:0 is out of memory: tried to allocate 100.00 MiB") != nullptr);
    CHECK(std::strstr(e.what(), "OPENREG_DEVICE_MEMORY") != nullptr);
  }
  CHECK(raised);
  CHECK(memory.stats().num_ooms == ooms + 1);
  memory.free(memory.malloc(kMiB, 0));
}

TEST(record_stream_delays_reuse_until_the_other_stream_has_run) {
  DeviceMemory& memory = device_memory(0);
  memory.empty_cache();
  Stream& other = get_stream(0, 1);
  void* p = memory.malloc(4096, 0);
  Gate gate;
  other.launch("reads p", gate.waiter());
  memory.record_stream(p, other);
  memory.free(p);
  CHECK(current(memory.stats().active) == 1);  // freed, but still in use on the other stream
  void* q = memory.malloc(4096, 0);
  CHECK(q != p);
  gate.open();
  other.synchronize();
  void* r = memory.malloc(4096, 0);
  CHECK(r == p);
  memory.free(q);
  memory.free(r);
  CHECK_THROWS(memory.record_stream(static_cast<char*>(r) + 1, other), Error);
}

TEST(a_block_freed_while_another_thread_holds_its_stream_waits_for_the_work_launched_meanwhile) {
  DeviceMemory& memory = device_memory(0);
  memory.empty_cache();
  Stream& s = get_stream(0, 11);
  s.synchronize();
  void* p = memory.malloc(4096, s.id());
  {
    Stream::InOrder held(s);  // this thread's work runs before what is launched meanwhile
    std::thread([&] {
      s.launch("writes p", [] {});  // queued behind the holder
      memory.free(p);
    }).join();
    void* q = memory.malloc(4096, s.id());
    CHECK(q != p);  // the queued write would land in the holder's block
    memory.free(q);
  }
  s.synchronize();
  void* r1 = memory.malloc(4096, s.id());
  void* r2 = memory.malloc(4096, s.id());
  CHECK(r1 == p || r2 == p);  // once that work has run, the block is reused
  memory.free(r1);
  memory.free(r2);
  memory.empty_cache();
  void* mine = memory.malloc(4096, s.id());
  {
    Stream::InOrder held(s);
    memory.free(mine);  // the holder's own block: nothing launched meanwhile uses it
    void* again = memory.malloc(4096, s.id());
    CHECK(again == mine);
    memory.free(again);
  }
}

TEST(accumulated_counts_reset) {
  DeviceMemory& memory = device_memory(0);
  memory.reset_accumulated();
  const MemoryStats s = memory.stats();
  CHECK(s.allocation[StatType::Aggregate].allocated == 0);
  CHECK(s.num_alloc_retries == 0 && s.num_ooms == 0 && s.num_device_alloc == 0);
}

int main() {
  setenv("OPENREG_DEVICE_MEMORY", "64MiB", 1);
  return run_tests();
}
