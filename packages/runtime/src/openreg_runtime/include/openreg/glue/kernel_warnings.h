#pragma once
// Warnings of queued kernels. A kernel runs on its stream's worker, where c10
// would print what it warns to stderr; the task holds those warnings for the
// thread that launched it instead, which passes them on at its next call into
// openreg (to Python's warnings, in a thread Python called into), as a failure
// found in values is raised at the next synchronising call.
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdint>

namespace openreg::glue::kernel_warnings {

// The calling thread's tag, for warnings to come back to it.
uint32_t this_thread();

// While it lives, what this thread warns is held for thread `launcher`.
class Hold : public c10::WarningHandler {
 public:
  explicit Hold(uint32_t launcher);
  ~Hold() override;
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  void process(const c10::Warning& warning) override;

 private:
  uint32_t launcher_;
  c10::WarningHandler* previous_;
};

// Drops what this thread warns while it is the handler: for openreg's own trial
// runs (a meta kernel, a dtype conversion), whose warnings are not the caller's.
struct Discard : c10::WarningHandler {
  void process(const c10::Warning&) override {}
};

extern std::atomic<uint32_t> g_held;  // held warnings, for all threads
void pass_on_held();
// Passes the warnings held for this thread on to its warning handler: one
// relaxed load when none are held, so every call into openreg can afford it.
inline void pass_on() {
  if (g_held.load(std::memory_order_relaxed) != 0) pass_on_held();
}

}  // namespace openreg::glue::kernel_warnings
