#include "openreg/glue/kernel_warnings.h"

#include <algorithm>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

namespace openreg::glue::kernel_warnings {

std::atomic<uint32_t> g_held{0};

namespace {

// Leaked: they outlive threads that exit late.
std::mutex g_mu;
std::vector<std::pair<uint32_t, c10::Warning>>& held() {
  static auto* h = new std::vector<std::pair<uint32_t, c10::Warning>>();
  return *h;
}
std::unordered_set<uint32_t>& live() {
  static auto* l = new std::unordered_set<uint32_t>();
  return *l;
}

std::vector<c10::Warning> take(uint32_t thread) {
  std::vector<c10::Warning> mine;
  std::lock_guard<std::mutex> lock(g_mu);
  auto& h = held();
  auto rest = std::stable_partition(h.begin(), h.end(), [&](const auto& e) { return e.first != thread; });
  for (auto it = rest; it != h.end(); ++it) mine.push_back(std::move(it->second));
  h.erase(rest, h.end());
  g_held.fetch_sub(static_cast<uint32_t>(mine.size()), std::memory_order_relaxed);
  return mine;
}

void pass_on(std::vector<c10::Warning> warnings) {
  c10::WarningHandler* handler = c10::WarningUtils::get_warning_handler();
  for (const auto& w : warnings) handler->process(w);
}

// A thread that exits with warnings held for it gives them to c10's handler
// (stderr) then, and later ones go there at once, rather than keeping every
// later call on the slow path.
struct Tag {
  uint32_t id;
  Tag() {
    static std::atomic<uint32_t> next{1};
    id = next.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(g_mu);
    live().insert(id);
  }
  ~Tag() {
    {
      std::lock_guard<std::mutex> lock(g_mu);
      live().erase(id);
    }
    if (g_held.load(std::memory_order_relaxed) != 0) pass_on(take(id));
  }
};

}  // namespace

uint32_t this_thread() {
  thread_local Tag tag;
  return tag.id;
}

Hold::Hold(uint32_t launcher) : launcher_(launcher), previous_(c10::WarningUtils::get_warning_handler()) {
  c10::WarningUtils::set_warning_handler(this);
}

Hold::~Hold() { c10::WarningUtils::set_warning_handler(previous_); }

void Hold::process(const c10::Warning& warning) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (live().count(launcher_) != 0) {
      held().emplace_back(launcher_, warning);
      g_held.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  // The launcher is gone: c10's own handler prints it, whichever thread runs the task (a host thread
  // that runs queued work has a Python handler installed, which would give it to the wrong thread).
  static c10::WarningHandler to_stderr;
  to_stderr.process(warning);
}

void pass_on_held() { pass_on(take(this_thread())); }

}  // namespace openreg::glue::kernel_warnings
