#pragma once
// A minimal harness for the core's C++ tests: no gtest, so that they build
// with a compiler and the core alone. A failed check names itself and ends
// the program with status 1; test_core_cpp.py shows the output.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

struct TestCase {
  const char* name;
  void (*run)();
};

inline std::vector<TestCase>& test_cases() {
  static std::vector<TestCase> cases;
  return cases;
}

#define TEST(name)                                                                     \
  static void name();                                                                  \
  static const bool name##_registered = (test_cases().push_back({#name, name}), true); \
  static void name()

[[noreturn]] inline void check_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what);
  std::fflush(nullptr);
  std::_Exit(1);  // not exit(): stream workers may be blocked in a task
}

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __FILE__, __LINE__))

#define CHECK_THROWS(statement, type)                              \
  do {                                                             \
    try {                                                          \
      statement;                                                   \
    } catch (const type&) {                                        \
      break;                                                       \
    }                                                              \
    check_failed(#statement " throws " #type, __FILE__, __LINE__); \
  } while (0)

inline int run_tests() {
  for (const TestCase& test : test_cases()) {
    std::printf("%s\n", test.name);
    std::fflush(stdout);
    test.run();
  }
  return 0;
}

// Holds a stream's worker inside a task until the test opens it, so that the
// test sees the stream busy. Copies share the gate.
class Gate {
 public:
  void open() const { open_->store(true); }
  // The task that waits for open().
  auto waiter() const {
    return [open = open_] {
      while (!open->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    };
  }

 private:
  std::shared_ptr<std::atomic<bool>> open_ = std::make_shared<std::atomic<bool>>(false);
};

inline void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
