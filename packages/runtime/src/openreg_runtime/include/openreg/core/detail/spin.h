#pragma once
// Spinning: a waiting thread that expects its answer within microseconds
// polls instead of sleeping (a futex wake costs microseconds).
#include <atomic>
#include <chrono>
#include <thread>

namespace openreg::detail {

// How long a thread spins before it sleeps: short enough not to hold a core
// when the device is idle.
constexpr auto kSpin = std::chrono::microseconds(50);

// One turn of a spin loop: tells the core that this thread only waits, so
// that it gives the pipeline to a sibling hardware thread and draws less
// power. Each architecture has its own instruction for it.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#else
  std::this_thread::yield();  // no pause instruction known here: leave the core instead
#endif
}

// Polls `done` for up to kSpin; returns its last answer.
template <typename Pred>
bool spin_until(Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() > deadline) return done();
  }
}

// Held for a few instructions at a time, by threads that must not sleep on a mutex.
class SpinLock {
 public:
  explicit SpinLock(std::atomic_flag& flag) : flag_(flag) {
    while (flag_.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
  }
  ~SpinLock() { flag_.clear(std::memory_order_release); }
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

 private:
  std::atomic_flag& flag_;
};

}  // namespace openreg::detail
