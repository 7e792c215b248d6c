// How many of the host's cores a kernel uses: the device's thread count (the
// intra-op thread count when the worker started) while the host is idle, one
// fewer while a host thread runs. The counts are per thread, so this sizes
// the teams of the worker's kernels only: ATen's, MKL's and Inductor's.
// A reduction's rounding depends on its team's size, so under
// torch.use_deterministic_algorithms(True) the team keeps its full size.
#include <ATen/Config.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <omp.h>

#include <algorithm>

#include "openreg/core/stream.h"

#if AT_MKL_ENABLED()
// MKL's C interface (the lower-case name is the Fortran one, by pointer), exported by libtorch_cpu.
extern "C" int MKL_Set_Num_Threads_Local(int threads);
#endif

namespace openreg::glue {
namespace {

void set_threads(int threads) {
  omp_set_num_threads(threads);
#if AT_MKL_ENABLED()
  MKL_Set_Num_Threads_Local(threads);  // else MKL keeps what ATen set on the worker's first parallel call
#endif
}

void size_team(const HostIdle& host_idle) {
  // Also ATen's first parallel set-up of this thread: it cannot undo a later set_threads.
  thread_local const int device_threads = at::get_num_threads();
  thread_local int current = device_threads;
  if (device_threads == 1) return;  // no core to leave the host
  const bool full = at::globalContext().deterministicAlgorithms() || host_idle();
  const int want = full ? device_threads : std::max(1, device_threads - 1);
  if (want != current) {
    set_threads(want);
    current = want;
  }
}

const bool registered = (set_task_hook(size_team), true);

}  // namespace
}  // namespace openreg::glue
