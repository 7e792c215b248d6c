#include <algorithm>

#include "openreg/core/memory.h"

namespace openreg {

void Stat::increase(int64_t n) {
  current += n;
  allocated += n;
  peak = std::max(peak, current);
}

void Stat::decrease(int64_t n) {
  current -= n;
  freed += n;
}

void StatArray::update(StatType pool, int64_t n) {
  for (StatType type : {StatType::Aggregate, pool}) {
    n >= 0 ? (*this)[type].increase(n) : (*this)[type].decrease(-n);
  }
}

namespace {

template <class F>
void for_each_stat(MemoryStats& stats, F f) {
  for (StatArray* a :
       {&stats.allocation, &stats.segment, &stats.active, &stats.allocated_bytes, &stats.reserved_bytes,
        &stats.active_bytes, &stats.requested_bytes, &stats.inactive_split, &stats.inactive_split_bytes}) {
    for (Stat& s : a->by_type) f(s);
  }
}

}  // namespace

void MemoryStats::reset_peak() {
  for_each_stat(*this, [](Stat& s) { s.peak = s.current; });
}

void MemoryStats::reset_accumulated() {
  for_each_stat(*this, [](Stat& s) { s.allocated = s.freed = 0; });
  num_alloc_retries = num_ooms = num_sync_all_streams = 0;
  num_device_alloc = num_device_free = 0;
}

}  // namespace openreg
