"""Kernels run on the host's cores with the device's thread count, whatever the host does meanwhile: a
reduction's rounding depends on how many threads share it, so a team that shrank while Python ran would make
the same call give other bits from one run to the next (gradcheck's reentrancy check sees it), where the CPU
and CUDA give the same.

Each case runs in a fresh interpreter that sets the intra-op thread count before the device starts (the
device's thread count), so the expectations do not depend on the machine's cores. A queued host
function reports the thread count its task was given (torch.get_num_threads() on the stream's worker).
The worker and its team are also scheduled as the host thread is.
"""

import os

import pytest

PRELUDE = """
import ctypes
import torch, openreg_runtime

FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
launch = ctypes.CDLL(None).openreg_launch_host_fn  # the runtime's C ABI, global once _C is loaded
launch.argtypes = [ctypes.c_char_p, FN, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                   ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
NAME = b"host function"  # outlives the tasks


def queue(fn):
    err = ctypes.create_string_buffer(256)
    assert launch(NAME, fn, None, None, None, 0, 0, err, 256) == 0, err.value
"""

SCRIPT = PRELUDE + """
import time

seen = []
report = FN(lambda ctx: seen.append(torch.get_num_threads()))


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


torch.set_num_threads(THREADS)
torch.ones(1, device="openreg")
torch.openreg.synchronize()
for _ in range(5):
    if CASE == "behind busy device, host waits":
        torch.openreg._sleep(20_000_000)
        queue(report)
        torch.openreg.synchronize()
    elif CASE == "host runs Python":
        queue(report)
        busy(0.02)
        torch.openreg.synchronize()
    elif CASE == "host launches more":
        queue(report)
        torch.ones(1, device="openreg")
        busy(0.02)
        torch.openreg.synchronize()
    elif CASE == "host waits right after launching":
        queue(report)
        torch.openreg.synchronize()
print(*seen)
"""


def _threads_seen(run_python, describe_proc, case: str, threads: int) -> list[int]:
    proc = run_python(f"CASE, THREADS = {case!r}, {threads}\n" + SCRIPT)
    assert proc.returncode == 0, describe_proc(proc)
    return [int(n) for n in proc.stdout.split()]


CASES = ["behind busy device, host waits", "host waits right after launching", "host runs Python", "host launches more"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("threads", [1, 3])
def test_kernels_get_the_devices_threads_whatever_the_host_does(run_python, describe_proc, case, threads):
    assert _threads_seen(run_python, describe_proc, case, threads) == [threads] * 5


POLICIES = PRELUDE + """
import os

torch.set_num_threads(3)
host = set(os.listdir("/proc/self/task"))
m = torch.ones(512, 512)
product = FN(lambda ctx: torch.mm(m, m))  # run by the worker: its team of kernel threads starts
torch.ones(1, device="openreg")
for _ in range(3):
    torch.openreg._sleep(20_000_000)  # the host sleeps meanwhile, so that the worker runs the next task
    queue(product)
    torch.openreg.synchronize()
policies = {int(t): os.sched_getscheduler(int(t)) for t in os.listdir("/proc/self/task")}
print(len(set(policies) - {int(t) for t in host}), os.sched_getscheduler(0), *set(policies.values()))
"""


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="the scheduling policy API is Linux's")
def test_device_threads_are_scheduled_as_the_host_thread_is(run_python, describe_proc):
    # A thread of a lower class (SCHED_BATCH, SCHED_IDLE) waits for a whole scheduler slice whenever it is woken
    # on a busy machine: a small training step ran 5-10x slower than on the CPU while its cores were contended.
    proc = run_python(POLICIES)
    assert proc.returncode == 0, describe_proc(proc)
    started, host_policy, *policies = (int(n) for n in proc.stdout.split())
    assert started >= 2, f"expected the worker and its team, saw {started} new threads"
    assert policies == [host_policy], proc.stdout
