#include "openreg/core/strict.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "openreg/core/detail/segment_map.h"
#include "openreg/core/device.h"
#include "openreg/core/sanitizer.h"

namespace openreg {
namespace {

using detail::find_segment;
using detail::Segment;
using detail::segments;
using detail::segments_mutex;

struct sigaction g_previous_fault_action;

void report_fault(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
  std::uintptr_t base = 0;
  Segment segment{};
  // A handler must not wait for a lock: a thread that holds it (briefly) means no description.
  if (segments_mutex().try_lock()) {
    auto it = find_segment(addr);
    if (it != segments().end()) base = it->first, segment = it->second;
    segments_mutex().unlock();
  }
  if (base != 0) {
    char text[800];
    const int n = std::snprintf(
        text, sizeof text,
        "\nopenreg: strict mode: the host touched device memory outside a kernel or copy, at %p: byte %zu of a "
        "%zu-byte allocation on openreg:%d (at %p). Under OPENREG_STRICT=1 device memory is only reachable from "
        "kernels and copies, as on real hardware: read it with .cpu(), .item() or .tolist(), not through its data "
        "pointer; a C++ extension reads it inside openreg::ext::launch, naming the tensor among those the launch "
        "touches (openreg/extension.h). Set OPENREG_STRICT=0 to run on. The Python stack of the faulting thread "
        "follows when Python's "
        "faulthandler is on (it is, from strict mode's start).\n",
        info->si_addr, static_cast<std::size_t>(addr - base), segment.size, segment.device,
        reinterpret_cast<void*>(base));
    if (n > 0) (void)!write(STDERR_FILENO, text, std::min<std::size_t>(n, sizeof text - 1));
    const std::size_t m = sanitizer::describe_unfinished_writer(base, text, sizeof text);
    if (m > 0) (void)!write(STDERR_FILENO, text, m);
  }
  const struct sigaction& previous = g_previous_fault_action;
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    return previous.sa_sigaction(sig, info, context);
  }
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler != nullptr) {
    return previous.sa_handler(sig);
  }
  // Returning runs the faulting access again, now under the default action (a core dump, a debugger's stop).
  signal(sig, SIG_DFL);
}

}  // namespace

int device_protection() { return config().strict ? PROT_NONE : (PROT_READ | PROT_WRITE); }

void install_fault_report() {
  static const bool installed = [] {
    struct sigaction action{};
    action.sa_sigaction = &report_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous_fault_action);
    return true;
  }();
  (void)installed;
}

HostAccess::HostAccess(const Touch* touches, std::size_t n) {
  if (!config().strict) return;
  std::lock_guard<std::mutex> lock(segments_mutex());
  for (std::size_t i = 0; i < n; ++i) {
    auto it = find_segment(reinterpret_cast<std::uintptr_t>(touches[i].ptr));
    if (it == segments().end()) continue;  // host memory
    if (it->second.access++ == 0) {
      mprotect(reinterpret_cast<void*>(it->first), it->second.size, PROT_READ | PROT_WRITE);
    }
    segments_.push_back(it->first);
  }
}

HostAccess::~HostAccess() {
  if (segments_.empty()) return;
  std::lock_guard<std::mutex> lock(segments_mutex());
  for (std::uintptr_t base : segments_) {
    auto it = segments().find(base);
    if (it != segments().end() && --it->second.access == 0) {
      mprotect(reinterpret_cast<void*>(base), it->second.size, PROT_NONE);
    }
  }
}

}  // namespace openreg
