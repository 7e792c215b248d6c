"""Strict mode (OPENREG_STRICT=1) and fork safety, each in a fresh interpreter."""

import functools
import json
import signal
import struct

import pytest

from openreg_runtime import testing

HOST_READ = """
    import ctypes, torch, openreg_runtime
    t = torch.full((4,), 1.5, device='openreg')
    torch.openreg.synchronize()
    print(ctypes.string_at(t.data_ptr(), 4).hex(), flush=True)
"""


def test_strict_mode_faults_on_host_access_and_says_why(run_python, describe_proc):
    proc = run_python(HOST_READ.replace("t.data_ptr()", "t.data_ptr() + 8"), env={"OPENREG_STRICT": "1"})
    assert proc.returncode == -signal.SIGSEGV, describe_proc(proc)  # still the fault, for debuggers and core dumps
    assert proc.stdout == ""
    assert "the host touched device memory outside a kernel or copy" in proc.stderr, describe_proc(proc)
    assert "byte 8 of a 4096-byte allocation on openreg:0" in proc.stderr, describe_proc(proc)
    assert "OPENREG_STRICT=0" in proc.stderr
    assert 'File "<string>", line 5 in <module>' in proc.stderr, describe_proc(proc)  # the Python stack


def test_strict_modes_fault_report_leaves_other_faults_alone(run_python, describe_proc):
    proc = run_python("""
        import ctypes, torch, openreg_runtime
        torch.full((4,), 1.5, device='openreg')
        ctypes.string_at(8, 4)
    """, env={"OPENREG_STRICT": "1"})
    assert proc.returncode == -signal.SIGSEGV, describe_proc(proc)
    assert "openreg" not in proc.stderr.split("Extension modules")[0], describe_proc(proc)


def test_without_strict_mode_host_access_reads_the_data(run_python, describe_proc):
    proc = run_python(HOST_READ)
    assert proc.returncode == 0, describe_proc(proc)
    assert proc.stdout.strip() == struct.pack("<f", 1.5).hex()
    proc = run_python(HOST_READ, env={"OPENREG_STRICT": "0"})
    assert proc.returncode == 0, describe_proc(proc)


def test_strict_mode_keeps_copies_and_printing_working(run_python, describe_proc):
    proc = run_python(
        """
        import io, re, torch, openreg_runtime
        from torch.testing import assert_close
        cpu = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        d = cpu.to('openreg')
        assert_close(d.cpu(), cpu)
        assert_close(d.t().contiguous().cpu(), cpu.t().contiguous())
        assert_close(d[1:, ::2].cpu(), cpu[1:, ::2])
        e = d.to('openreg:1')
        assert_close(e.cpu(), cpu)
        f = torch.empty(4, 6, device='openreg').copy_(e)
        assert_close(f.cpu(), cpu)
        g = torch.zeros(4, 6, device='openreg'); g.fill_(2.0)
        assert_close(g.cpu(), torch.full((4, 6), 2.0))
        p = torch.empty(4, 6).pin_memory()
        p.copy_(d, non_blocking=True)
        torch.openreg.synchronize()
        assert_close(p, cpu)
        assert d[2, 3].item() == 15.0
        assert d.tolist() == cpu.tolist()
        big = torch.randn(100, 100)
        norm = lambda text: re.sub(r"\\s+", " ", re.sub(r",\\s*device='openreg:0'", "", text))
        assert norm(repr(big.to('openreg'))) == norm(repr(big))
        buf = io.BytesIO(); torch.save(d, buf); buf.seek(0)
        assert_close(torch.load(buf, map_location='cpu'), cpu)
        d.resize_(100)
        assert_close(d[:24].view(4, 6).cpu(), cpu)
        print(repr(torch.ones(2, device='openreg')))
        print('OK')
        """,
        env={"OPENREG_STRICT": "1"},
    )
    assert proc.returncode == 0, describe_proc(proc)
    assert proc.stdout.splitlines() == ["tensor([1., 1.], device='openreg:0')", "OK"]


FORK = """
    import os, re, sys, torch, openreg_runtime
    if {init}:
        t = torch.ones(4, device='openreg')
        assert t.cpu().tolist() == [1.0] * 4
    pid = os.fork()
    if pid == 0:
        try:
            {action}
        except RuntimeError as e:  # CUDA's words, which PyTorch's tests match for every accelerator
            cuda = "Cannot re-initialize .* in forked subprocess. To use .* with multiprocessing, you must use the"
            os._exit(10 if re.match(cuda, str(e)) else 11)
        except BaseException:
            os._exit(12)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print('child', os.waitstatus_to_exitcode(status))
    assert torch.ones(2, device='openreg').cpu().tolist() == [1.0, 1.0]  # the parent still works
    torch.openreg.synchronize()
    print('parent ok')
"""

ACTIONS = {
    "create": "torch.ones(1, device='openreg')",
    "synchronize": "torch.openreg.synchronize()",
    "copy": "torch.ones(1).to('openreg')",
}


@pytest.mark.parametrize("action", ACTIONS)
def test_device_use_in_forked_child_raises(run_python, describe_proc, action):
    proc = run_python(FORK.format(init=True, action=ACTIONS[action]), timeout=60)
    assert proc.returncode == 0, describe_proc(proc)
    # exit 10: RuntimeError in CUDA's words; 0: no error; 11: other message; 12: other exception
    assert proc.stdout.splitlines() == ["child 10", "parent ok"], describe_proc(proc)


def test_fork_before_first_use_is_fine(run_python, describe_proc):
    action = "assert torch.ones(3, device='openreg').cpu().tolist() == [1.0] * 3; torch.openreg.synchronize()"
    proc = run_python(FORK.format(init=False, action=action), timeout=60)
    assert proc.returncode == 0, describe_proc(proc)
    assert proc.stdout.splitlines() == ["child 0", "parent ok"], describe_proc(proc)


def test_bad_fork_flag(run_python, describe_proc):
    proc = run_python(
        """
        import os, torch, openreg_runtime
        torch.ones(1, device='openreg')
        pid = os.fork()
        if pid == 0:
            os._exit(20 if torch.openreg._is_in_bad_fork() else 21)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), torch.openreg._is_in_bad_fork())
        """,
        timeout=60,
    )
    assert proc.returncode == 0, describe_proc(proc)
    assert proc.stdout.split() == ["20", "False"]


# Host-side operations on device bytes, each after a write queued behind a 300 ms task: each must see the write
# (stream order) and touch device memory only where strict mode allows it.
HOST_OPS = {
    "set_ that grows the storage": "y = torch.empty(0, device='openreg'); y.set_(x.untyped_storage(), 0, (8,), (1,))"
                                   "; r = y[:4].cpu()",
    "Tensor.resize_ that grows": "x.resize_(100); r = x[:4].cpu()",
    "UntypedStorage.resize_": "s = x.untyped_storage(); s.resize_(4096); "
                              "r = torch.empty(0, device='openreg').set_(s, 0, (4,), (1,)).cpu()",
    "UntypedStorage.tolist": "r = torch.tensor(x.untyped_storage().tolist()[:16], dtype=torch.uint8)"
                             ".view(torch.float32)",
    "UntypedStorage.copy_": "s = torch.UntypedStorage(16, device='openreg'); s.copy_(x.untyped_storage()); "
                           "r = torch.empty(0, device='openreg').set_(s, 0, (4,), (1,)).cpu()",
    "UntypedStorage.cpu": "r = torch.empty(0).set_(x.untyped_storage().cpu(), 0, (4,), (1,))",
    "UntypedStorage[i]": "r = torch.tensor([x.untyped_storage()[i] for i in range(16)], dtype=torch.uint8)"
                         ".view(torch.float32)",
    "UntypedStorage.clone": "r = torch.empty(0, device='openreg').set_(x.untyped_storage().clone(), 0, (4,), (1,))"
                            ".cpu()",
    "torch.save": "b = io.BytesIO(); torch.save(x, b); b.seek(0); r = torch.load(b, map_location='cpu')",
    "Tensor.tolist": "r = torch.tensor(x.tolist())",
}


@functools.cache
def _host_ops_run(strict: str):
    """Every HOST_OPS entry in one interpreter (a start-up costs more than all of them), each on a fresh tensor;
    prints a JSON line [op, its first four values or its error] per op."""
    return testing.run_python(f"""
        import io, json, torch, openreg_runtime
        for op, code in {HOST_OPS!r}.items():
            x = torch.zeros(4, device='openreg')
            torch.openreg.synchronize()
            torch.openreg._sleep(300_000_000)
            x.fill_(2.5)  # queued behind the sleep
            scope = {{"io": io, "torch": torch, "x": x}}
            try:
                exec(code, scope)
                print(json.dumps([op, scope["r"].tolist()[:4]]), flush=True)
            except Exception as e:
                print(json.dumps([op, f"{{type(e).__name__}}: {{e}}"]), flush=True)
    """, env={"OPENREG_STRICT": strict})


@pytest.mark.parametrize("strict", ["0", "1"])
@pytest.mark.parametrize("op", HOST_OPS)
def test_host_side_storage_operations_are_stream_ordered_and_strict_safe(describe_proc, op, strict):
    proc = _host_ops_run(strict)
    results = dict(json.loads(line) for line in proc.stdout.splitlines())
    # A strict-mode fault ends the run at the op that made it: the ops after it have no result.
    assert results.get(op) == [2.5, 2.5, 2.5, 2.5], describe_proc(proc)
    assert proc.returncode == 0, describe_proc(proc)
