#include "openreg/core/sanitizer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "openreg/core/detail/segment_map.h"
#include "openreg/core/device.h"
#include "openreg/core/error.h"
#include "openreg/core/stream.h"

namespace openreg::sanitizer {
namespace detail {
std::atomic<int> g_mode{0};
}

namespace {

// One use of an allocation by a task (or by host work in a stream's order).
struct Access {
  int stream = -1;  // index(): device and stream id
  uint64_t seq = 0;
  uint64_t generation = 0;  // which allocation of the block it was
  const char* op = nullptr;
  std::shared_ptr<const void> site;
};

struct Record {
  Access write;               // the last write (stream < 0: none)
  std::vector<Access> reads;  // the last read of each stream since
  uint64_t generation = 0;    // frees of the block so far
};

struct Conflict {
  Access earlier;
  bool earlier_writes, later_writes, reused;
  std::uintptr_t base;
  std::size_t size;
};

std::mutex g_mu;
thread_local bool t_as_if_queued = false;
Hooks g_hooks;
std::vector<Clock> g_streams;  // by index()
Clock g_host;
std::unordered_map<std::uintptr_t, Record> g_records;  // by allocation base

int index(const Stream& s) { return s.device() * kStreams + s.id(); }
int device_of_index(int i) { return i / kStreams; }
int id_of_index(int i) { return i % kStreams; }

std::size_t clock_size() { return static_cast<std::size_t>(device_count()) * kStreams; }

// Sized on first use: most of the streams of most devices never run anything.
Clock& stream_clock(int i) {
  if (g_streams.empty()) g_streams.resize(clock_size());
  Clock& clock = g_streams[i];
  if (clock.empty()) clock.resize(clock_size(), 0);
  return clock;
}

void merge(Clock& into, const Clock& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (std::size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

bool ordered(const Clock& clock, const Access& a) { return a.stream < 0 || clock[a.stream] >= a.seq; }

// A touch of device memory, by the allocation it falls in.
struct Use {
  std::uintptr_t base;
  std::size_t size;
  bool write;
};

// Host memory (and null) is left out.
std::vector<Use> uses_of(const Touch* touches, std::size_t n) {
  std::vector<Use> uses;
  std::lock_guard<std::mutex> lock(openreg::detail::segments_mutex());
  for (std::size_t k = 0; k < n; ++k) {
    auto it = openreg::detail::find_segment(reinterpret_cast<std::uintptr_t>(touches[k].ptr));
    if (touches[k].ptr != nullptr && it != openreg::detail::segments().end()) {
      uses.push_back(Use{it->first, it->second.size, touches[k].write});
    }
  }
  return uses;
}

std::string where(int i) {
  return "openreg:" + std::to_string(device_of_index(i)) + " stream " + std::to_string(id_of_index(i));
}

std::string site_text(const std::shared_ptr<const void>& site) {
  std::string text = site && g_hooks.format_site ? g_hooks.format_site(site.get()) : "";
  return text.empty() ? "    (no Python stack: launched from C++)\n" : text;
}

const char* verb(bool writes) { return writes ? "writes" : "reads"; }

// Formatted without the lock: the site hook may wait for Python.
std::string report(const Access& later, const std::vector<Conflict>& conflicts) {
  std::string out;
  for (const Conflict& c : conflicts) {
    const std::string now = where(later.stream), then = where(c.earlier.stream);
    char mem[96];
    std::snprintf(mem, sizeof mem, "a %zu-byte allocation at %p", c.size, reinterpret_cast<void*>(c.base));
    if (c.reused) {
      out += "openreg stream sanitizer: device memory was freed and reused while another stream may still use it: '" +
             std::string(later.op) + "' on " + now + " " + verb(c.later_writes) + " " + mem +
             ", which the freed tensor's last user '" + c.earlier.op + "' on " + then + " " + verb(c.earlier_writes) +
             " with nothing ordering the two.\n";
    } else {
      out += "openreg stream sanitizer: unsynchronized use of device memory: '" + std::string(later.op) + "' on " +
             now + " " + verb(c.later_writes) + " " + mem + " that '" + c.earlier.op + "' on " + then + " " +
             verb(c.earlier_writes) +
             ", and nothing orders the two (no event wait, wait_stream or synchronize "
             "between them), so it may run before, during or after it.\n";
    }
    out += "  '" + std::string(later.op) + "' was launched at:\n" + site_text(later.site);
    out += "  '" + std::string(c.earlier.op) + "' was launched at:\n" + site_text(c.earlier.site);
    if (c.reused) {
      out +=
          "Fix: call tensor.record_stream(s) for a tensor used on a stream s other than the one it was allocated "
          "on (here " +
          then + "), or make the allocating stream wait for " + then + " before the tensor is freed.\n";
    } else {
      out += "Fix: make " + now + " wait for " + then + " first (stream.wait_stream(other), or an event recorded " +
             "after '" + c.earlier.op + "' and waited for), or synchronize.\n";
    }
  }
  return out;
}

// Checks the uses of a task on stream `i` with `clock`, under g_mu.
std::vector<Conflict> check(int i, const Clock& clock, const std::vector<Use>& uses) {
  std::vector<Conflict> found;
  for (const Use& use : uses) {
    auto it = g_records.find(use.base);
    if (it == g_records.end()) continue;
    const Record& r = it->second;
    auto conflict = [&](const Access& a, bool writes) {
      if (a.stream < 0 || a.stream == i || ordered(clock, a)) return;
      found.push_back(Conflict{a, writes, use.write, a.generation != r.generation, use.base, use.size});
    };
    conflict(r.write, true);
    if (use.write) {
      for (const Access& a : r.reads) conflict(a, false);
    }
  }
  return found;
}

void record(const Access& a, const std::vector<Use>& uses) {
  for (const Use& use : uses) {
    Record& r = g_records[use.base];
    Access mine = a;
    mine.generation = r.generation;
    if (use.write) {
      r.write = std::move(mine);
      r.reads.clear();
      continue;
    }
    auto same = std::find_if(r.reads.begin(), r.reads.end(), [&](const Access& x) { return x.stream == a.stream; });
    if (same != r.reads.end()) {
      *same = std::move(mine);
    } else {
      r.reads.push_back(std::move(mine));
    }
  }
}

void warn(const std::string& text) {
  if (g_hooks.warn != nullptr) return g_hooks.warn(text);
  std::fputs(text.c_str(), stderr);
}

}  // namespace

Mode mode() { return static_cast<Mode>(detail::g_mode.load(std::memory_order_relaxed)); }

void set_mode(Mode m) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_streams.clear();
  g_host.clear();
  g_records.clear();
  detail::g_mode.store(static_cast<int>(m), std::memory_order_relaxed);
}

Mode parse_mode(const char* text) {
  const std::string v = text == nullptr ? "" : text;
  if (v.empty() || v == "0" || v == "off") return Mode::kOff;
  if (v == "streams") return Mode::kError;
  if (v == "streams:warn") return Mode::kWarn;
  throw Error("OPENREG_SANITIZE='" + v +
              "' is not a sanitizer: use 'streams' (unsynchronized streams raise), 'streams:warn' (they warn), or "
              "unset it");
}

void set_hooks(const Hooks& hooks) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_hooks = hooks;
}

struct Launch::State {
  std::unique_lock<std::mutex> lock;
  int stream;
  const char* op;
  std::shared_ptr<const void> site;
  std::vector<Use> uses;
  std::vector<Conflict> conflicts;
};

Launch::Launch(const Stream& stream, const char* op, const Touch* touches, std::size_t n) {
  // Gathered before the lock: it may wait for Python. Launches without touches (events, the allocator's) need none.
  std::shared_ptr<const void> site = n > 0 && g_hooks.capture_site ? g_hooks.capture_site() : nullptr;
  std::vector<Use> uses = uses_of(touches, n);
  state_.reset(new State{std::unique_lock<std::mutex>(g_mu), index(stream), op, std::move(site), std::move(uses), {}});
  Clock& clock = stream_clock(state_->stream);
  merge(clock, g_host);
  state_->conflicts = check(state_->stream, clock, state_->uses);
  if (state_->conflicts.empty() || mode() != Mode::kError) return;
  const Access me{state_->stream, 0, 0, op, state_->site};
  std::vector<Conflict> conflicts = std::move(state_->conflicts);
  state_.reset();  // unlocks: nothing was queued or recorded
  throw Error(report(me, conflicts));
}

Launch::~Launch() = default;

void Launch::queued(uint64_t seq) {
  State& s = *state_;
  stream_clock(s.stream)[s.stream] = seq;
  Access me{s.stream, seq, 0, s.op, s.site};
  record(me, s.uses);
  std::vector<Conflict> conflicts = std::move(s.conflicts);
  state_.reset();
  if (!conflicts.empty()) warn(report(me, conflicts));
}

void host_work(Stream& stream, const char* op, const Touch* touches, std::size_t n) {
  // Work that stands for a queued kernel takes a place of its own in the stream's order: at the stream's last
  // task it would look ordered before whatever another stream already saw of this one.
  if (t_as_if_queued) stream.launch("a call run in place, in the stream's order", [] {});
  std::optional<Launch> work;
  work.emplace(stream, op, touches, n);
  // In the stream's order after its last task, which has run: later work on any stream follows it.
  work->queued(stream.last());
  host_waited(stream, stream.last());
}

AsIfQueued::AsIfQueued() : outer_(t_as_if_queued) { t_as_if_queued = true; }
AsIfQueued::~AsIfQueued() { t_as_if_queued = outer_; }

void host_waited(const Stream& stream, uint64_t seq) {
  if (t_as_if_queued) return;
  std::lock_guard<std::mutex> lock(g_mu);
  const int i = index(stream);
  Clock& clock = stream_clock(i);
  if (g_host.size() < clock.size()) g_host.resize(clock.size(), 0);
  if (seq >= clock[i]) {
    merge(g_host, clock);  // it waited for the last task: what that task followed, it follows
  } else {
    g_host[i] = std::max(g_host[i], seq);
  }
}

std::shared_ptr<const Clock> clock_of(const Stream& stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  return std::make_shared<const Clock>(stream_clock(index(stream)));
}

void stream_waits(const Stream& stream, const Clock& clock) {
  std::lock_guard<std::mutex> lock(g_mu);
  merge(stream_clock(index(stream)), clock);
}

void host_waits(const Clock& clock) {
  if (t_as_if_queued) return;
  std::lock_guard<std::mutex> lock(g_mu);
  merge(g_host, clock);
}

void freed(const void* base) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_records.find(reinterpret_cast<std::uintptr_t>(base));
  if (it != g_records.end()) ++it->second.generation;
}

void unmapped(const void* base) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_records.erase(reinterpret_cast<std::uintptr_t>(base));
}

std::size_t describe_unfinished_writer(std::uintptr_t base, char* out, std::size_t size) {
  if (!on() || !g_mu.try_lock()) return 0;
  std::size_t written = 0;
  auto it = g_records.find(base);
  if (it != g_records.end() && it->second.write.stream >= 0) {
    const Access& w = it->second.write;
    const int device = device_of_index(w.stream), id = id_of_index(w.stream);
    if (!get_stream(device, id).reached(w.seq)) {
      const int n = std::snprintf(out, size,
                                  "The stream sanitizer knows its writer: '%s', queued on openreg:%d stream %d, has "
                                  "not run yet; synchronize (torch.openreg.synchronize(), or an event) before the "
                                  "host reads the memory.\n",
                                  w.op, device, id);
      written = n > 0 ? std::min<std::size_t>(n, size - 1) : 0;
    }
  }
  g_mu.unlock();
  return written;
}

}  // namespace openreg::sanitizer
