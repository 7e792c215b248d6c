#include "openreg/core/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <unordered_map>

#include "openreg/core/stream.h"

namespace openreg::trace {
namespace detail {
std::atomic<bool> g_on{false};
}

namespace {

struct Launch {
  uint64_t tag;
  int thread;
  int64_t begin, end;
};

// Profiling is rare and its cost is accepted while it lasts: one lock orders everything.
std::mutex g_mu;
std::atomic<TagFn> g_tag{nullptr};
std::unordered_map<const void*, Launch> g_launched;  // by task: queued, not yet run
std::vector<Record> g_records;

}  // namespace

int64_t now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void start(TagFn tag) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_tag.store(tag, std::memory_order_relaxed);
  g_launched.clear();
  g_records.clear();
  detail::g_on.store(true, std::memory_order_relaxed);
}

std::vector<Record> stop() {
  std::lock_guard<std::mutex> lock(g_mu);
  detail::g_on.store(false, std::memory_order_relaxed);
  g_launched.clear();
  std::vector<Record> records;
  records.swap(g_records);
  return records;
}

void launched(const void* task, int64_t begin) {
  const TagFn tag = g_tag.load(std::memory_order_relaxed);
  const Launch launch{tag != nullptr ? tag() : 0, static_cast<int>(syscall(SYS_gettid)), begin, now()};
  std::lock_guard<std::mutex> lock(g_mu);
  if (on()) g_launched[task] = launch;
}

void ran(const Stream& stream, const void* task, const char* name, int64_t start) {
  const int64_t end = now();
  std::lock_guard<std::mutex> lock(g_mu);
  if (!on()) return;
  Launch launch{};
  if (auto it = g_launched.find(task); it != g_launched.end()) {
    launch = it->second;
    g_launched.erase(it);
  }
  g_records.push_back(
      {name, stream.device(), stream.id(), launch.tag, launch.thread, launch.begin, launch.end, start, end});
}

void ran_here(const Stream& stream, const char* name, int64_t start) {
  const TagFn tag = g_tag.load(std::memory_order_relaxed);
  const uint64_t tagged = tag != nullptr ? tag() : 0;
  const int64_t end = now();
  std::lock_guard<std::mutex> lock(g_mu);
  if (on()) g_records.push_back({name, stream.device(), stream.id(), tagged, 0, start, start, start, end});
}

}  // namespace openreg::trace
