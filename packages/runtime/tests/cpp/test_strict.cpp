// Strict mode: the host reaches device memory only inside kernels and copies;
// any other access faults with a report naming the allocation.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "openreg/core/c_api.h"
#include "openreg/core/memory.h"
#include "openreg/core/segments.h"
#include "openreg/core/strict.h"

using namespace openreg;

struct Outcome {
  bool faulted;
  bool exited_cleanly;
  std::string stderr_text;
};

// Runs `touch` in a forked child, which shares this process's mappings and
// their protection, so a fault ends the child and not the test.
template <class F>
Outcome in_child(F touch) {
  int pipe_fds[2];
  CHECK(pipe(pipe_fds) == 0);
  const pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    dup2(pipe_fds[1], STDERR_FILENO);
    touch();
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) > 0;) text.append(buf, n);
  close(pipe_fds[0]);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  return {WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, WIFEXITED(status) && WEXITSTATUS(status) == 0, text};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

char read_byte(const void* p, std::size_t at) { return static_cast<const volatile char*>(p)[at]; }

TEST(a_host_access_outside_a_kernel_faults_with_a_report) {
  void* p = device_memory(0).malloc(2 * 4096, 0);
  const Outcome outcome = in_child([p] { read_byte(p, 10); });
  CHECK(outcome.faulted);
  CHECK(contains(outcome.stderr_text, "strict mode: the host touched device memory outside a kernel or copy"));
  CHECK(contains(outcome.stderr_text, "byte 10 of a 8192-byte allocation on openreg:0"));
  device_memory(0).free(p);
}

TEST(a_kernel_reaches_the_memory_it_names_for_its_duration_only) {
  void* p = device_memory(0).malloc(4096, 0);
  {
    HostAccess access({p});
    static_cast<char*>(p)[0] = 42;
  }
  CHECK(in_child([p] { read_byte(p, 0); }).faulted);
  CHECK(in_child([p] {
          HostAccess access({p});
          if (read_byte(p, 0) != 42) _exit(1);
        }).exited_cleanly);
  device_memory(0).free(p);
}

TEST(a_task_launched_through_the_c_abi_reaches_its_memory) {
  void* p = device_memory(0).malloc(4096, 0);
  const void* ptrs[] = {p};
  char error[256] = "";
  auto fill = [](void* ctx) { std::memset(ctx, 7, 4096); };
  CHECK(openreg_launch_host_fn("fill", fill, p, nullptr, ptrs, 1, OPENREG_LAUNCH_WAIT, error, sizeof error) == 0);
  HostAccess access({p});
  CHECK(static_cast<char*>(p)[4095] == 7);
  device_memory(0).free(p);
}

TEST(a_use_after_free_faults) {
  void* p = device_memory(0).malloc(4096, 0);
  device_memory(0).free(p);  // cached: still device memory
  const Outcome outcome = in_child([p] { read_byte(p, 0); });
  CHECK(outcome.faulted);
  CHECK(contains(outcome.stderr_text, "byte 0 of a 4096-byte allocation on openreg:0"));
  device_memory(0).empty_cache();  // unmapped: no longer device memory, still a fault
  CHECK(in_child([p] { read_byte(p, 0); }).faulted);
}

TEST(a_kernel_reading_past_its_allocation_faults) {
  // New mappings are placed next to earlier ones: find an allocation that
  // device memory follows, so that the byte past its end is someone else's.
  std::vector<void*> held;
  void* p = nullptr;
  for (int i = 0; i < 16 && p == nullptr; ++i) {
    void* candidate = device_memory(0).malloc(4096, 0);
    held.push_back(candidate);
    if (device_of(static_cast<char*>(candidate) + 4096) >= 0) p = candidate;
  }
  CHECK(p != nullptr);
  CHECK(in_child([p] {
          HostAccess access({p});
          read_byte(p, 4095);
        }).exited_cleanly);
  const Outcome outcome = in_child([p] {
    HostAccess access({p});
    read_byte(p, 4096);
  });
  CHECK(outcome.faulted);
  CHECK(contains(outcome.stderr_text, "byte 0 of a "));  // of the next allocation
  for (void* h : held) device_memory(0).free(h);
}

int main() {
  setenv("OPENREG_STRICT", "1", 1);
  install_fault_report();
  return run_tests();
}
