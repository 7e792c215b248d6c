"""Warnings from queued kernels: a kernel warns on the stream's worker, and the warning reaches the `warnings` of
the thread that launched it, at that thread's next call into openreg, once; it is not lost to stderr, not
given to another thread, and `-W error` turns it into an exception there."""

import threading
import warnings

import torch

import openreg_runtime._C as C
from openreg_runtime.testing import describe, run_python


def _messages(caught) -> list[tuple[type, str]]:
    return [(w.category, str(w.message).split(" (Triggered internally")[0]) for w in caught]


def _recorded(fn) -> list[tuple[type, str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return _messages(caught)


def test_a_kernels_warning_reaches_the_launching_thread_at_its_next_sync_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.openreg._sleep(200_000_000)  # the kernel cannot have run when the launch returns
        C._warn("the kernel saw something odd")
        assert _messages(caught) == [], "a queued kernel warned before it ran"
        torch.openreg.synchronize()
    assert _messages(caught) == [(UserWarning, "the kernel saw something odd")]
    assert _recorded(torch.openreg.synchronize) == []  # given once


def test_a_blocking_copy_passes_the_warning_on_too():
    def launch_then_read():
        C._warn("from a kernel")
        torch.empty(4, device="openreg").cpu()

    assert _recorded(launch_then_read) == [(UserWarning, "from a kernel")]


def test_another_threads_kernel_warning_stays_with_that_thread():
    seen = {}

    def other():
        seen["other"] = _recorded(lambda: (C._warn("from the other thread"), torch.openreg.synchronize()))

    def launch_elsewhere():
        t = threading.Thread(target=other)
        t.start()
        t.join()
        torch.openreg.synchronize()

    assert _recorded(launch_elsewhere) == []
    assert seen["other"] == [(UserWarning, "from the other thread")]


def test_warnings_as_errors_raise_at_the_sync():
    torch.openreg._sleep(200_000_000)  # the kernel warns after the launch has returned
    C._warn("now an error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            torch.openreg.synchronize()
        except UserWarning as e:
            assert "now an error" in str(e)
        else:
            raise AssertionError("synchronize() did not raise the kernel's warning under -W error")
    assert _recorded(torch.openreg.synchronize) == []


def test_a_thread_gone_before_its_kernel_warned_leaves_the_warning_on_stderr():
    proc = run_python("""
        import threading, warnings
        import torch, openreg_runtime, openreg_runtime._C as C

        def launch():
            torch.openreg._sleep(200_000_000)
            C._warn("launched by a thread that is gone")

        t = threading.Thread(target=launch)
        t.start()
        t.join()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.openreg.synchronize()
        print(len(caught))
    """)
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.strip() == "0", describe(proc)
    assert "launched by a thread that is gone" in proc.stderr, describe(proc)


_DROPPED = "Casting complex values to real discards the imaginary part"


def _complex_to_real_copies(device):
    """Copies that drop an imaginary part, by what they copy between: each returns a callable doing one."""
    src = torch.tensor([1 + 2j, 3 - 1j], device=device)
    pinned_src = torch.tensor([1 + 2j, 3 - 1j]).pin_memory() if device != "cpu" else src
    other = "openreg:1" if device != "cpu" else "cpu"

    def empty():
        return torch.empty(2, device=device)

    return {
        "to(dtype)": lambda: src.to(torch.float64),
        "copy_": lambda: empty().copy_(src),
        "to another device": lambda: src.to(other, torch.float64),
        "pinned host to device, non_blocking": lambda: empty().copy_(pinned_src, non_blocking=True),
        "device to pinned host, non_blocking": lambda: torch.empty(2).pin_memory().copy_(src, non_blocking=True),
    }


def test_a_copy_that_drops_imaginary_parts_warns_at_the_call_as_on_the_cpu():
    torch.set_warn_always(True)  # the CPU's kernel warns once per process otherwise
    try:
        for device, sync in (("cpu", lambda: None), ("openreg", torch.openreg.synchronize)):
            for kind, copy in _complex_to_real_copies(device).items():
                at_call, later = _recorded(copy), _recorded(sync)
                assert (at_call, later) == ([(UserWarning, _DROPPED)], []), (device, kind, at_call, later)
    finally:
        torch.set_warn_always(False)


def test_a_graph_capture_records_such_a_copy_rather_than_waiting_for_the_stream():
    src = torch.tensor([1 + 2j, 3 - 1j], device="openreg")
    dst = torch.zeros(2, device="openreg")
    g = torch.openreg.OpenRegGraph()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.openreg.graph(g):
            dst.copy_(src)
        g.replay()
        assert dst.cpu().tolist() == [1.0, 3.0]
