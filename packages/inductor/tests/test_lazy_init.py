"""The lazy Inductor backend initialisation contract: `torch.openreg._inductor_backend_init` runs at the
first Inductor compilation through every entry point (before the compilation selects its decomposition
table), never at `import torch`, once; a failure propagates and the next compilation retries;
concurrent first compilations wait for one initialisation. Each case runs in a fresh interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Results are compared with atol=1e-5: generated kernels round differently from ATen's (vectorised sin,
# fused multiply-add), and allclose's default atol=1e-8 fails on a one-ulp difference near zero.
# Instruments the hook and the decomposition-table selection, then runs ENTRY and prints what happened.
PRELUDE = """
import json, sys, threading, time, torch
imported_at_import = [m for m in ("torch._inductor", "torch._dynamo", "openreg_inductor") if m in sys.modules]
import openreg._compile
events = []
hook = openreg._compile.backend_init  # what torch.openreg._inductor_backend_init runs, stand-in or not
def counted():
    events.append("init")
    hook()
openreg._compile.backend_init = counted
import torch._inductor.compile_fx as compile_fx_module
select = compile_fx_module.select_decomp_table
def recorded():
    events.append("decomp")
    return select()
compile_fx_module.select_decomp_table = recorded
def fn(x):
    return (x.sin() + 1,)
x = torch.randn(8)
"""

ENTRIES = {
    "torch.compile": "torch.compile(fn)(x); torch.compile(lambda x: x * 3)(x)",
    "torch.compile on openreg": "torch.compile(fn)(x.to('openreg')); torch.compile(lambda x: x * 3)(x.to('openreg'))",
    "compile_fx": "gm = torch.fx.symbolic_trace(fn); compile_fx_module.compile_fx(gm, [x]); "
                  "compile_fx_module.compile_fx(torch.fx.symbolic_trace(lambda x: (x * 3,)), [x])",
    "cpp_wrapper": "import torch._inductor.config as c; c.cpp_wrapper = True; torch.compile(fn)(x)",
    "aot_compile": "m = torch.export.export(torch.nn.Sequential(torch.nn.ReLU()), (x,)).module(); "
                   "torch._inductor.aot_compile(m, (x,))",
}


def run(body: str, env: dict[str, str] | None = None) -> dict:
    code = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps({'imported': imported_at_import, 'events': events}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("entry", ENTRIES)
def test_hook_runs_once_at_the_first_compilation_before_decompositions(entry):
    result = run(ENTRIES[entry])
    assert result["imported"] == []  # nothing of Dynamo, Inductor or openreg_inductor at import torch
    assert result["events"][0] == "init", result
    assert result["events"].count("init") == 1, result
    assert "decomp" in result["events"]


def test_a_failing_hook_fails_the_compilation_and_the_next_one_retries():
    result = run("""
        import openreg_inductor.backend as backend
        prepare, failures = backend.prepare, []
        def failing_once():
            if not failures:
                failures.append(1)
                raise RuntimeError("vendor init failed")
            prepare()
        backend.prepare = failing_once
        try:
            torch.compile(fn)(x.to("openreg"))
        except Exception as exc:
            events.append(f"raised: {exc}")
        torch._dynamo.reset()
        out = torch.compile(fn)(x.to("openreg"))[0]
        events.append(bool(torch.allclose(out.cpu(), fn(x)[0], atol=1e-5)))
    """)
    events = result["events"]
    assert events[0] == "init" and "vendor init failed" in events[1], events
    assert events.count("init") == 2 and events[-1] is True, events


def test_concurrent_first_compilations_wait_for_one_initialisation():
    result = run("""
        import openreg_inductor.backend as backend
        prepare, entered = backend.prepare, []
        def slow_prepare():
            entered.append(1)
            time.sleep(1.0)  # long enough for the other thread to arrive
            prepare()
        backend.prepare = slow_prepare
        results = []
        def compile_one(scale):
            try:
                x = torch.randn(8, device="openreg")
                out = torch.compile(lambda x: x * scale + 1)(x)
                results.append(bool(torch.allclose(out.cpu(), x.cpu() * scale + 1, atol=1e-5)))
            except Exception as exc:
                results.append(repr(exc))
        threads = [threading.Thread(target=compile_one, args=(s,)) for s in (2.0, 3.0)]
        for t in threads: t.start()
        for t in threads: t.join()
        events.extend([len(entered), results])
    """)
    assert result["events"][-2:] == [1, [True, True]], result


def test_a_torch_that_calls_the_hook_itself_is_left_to_do_so():
    # Capability detection: with a torch whose Inductor calls `_inductor_backend_init` (simulated),
    # openreg does not wrap compile_fx; compiling for openreg still initialises once.
    code = """
        import torch, openreg._torch_patches as patches
        patches.torch_calls_hook = lambda: True
        import torch._inductor.compile_fx as m
        assert m.compile_fx._openreg_runs_hook is False  # left to torch
        from torch._inductor.codegen.common import get_scheduling_for_device, init_backend_registration
        torch.openreg.init()  # the runtime's device module, which holds the hook from now on
        hook = torch.openreg._inductor_backend_init
        calls = []
        torch.openreg._inductor_backend_init = lambda: (calls.append(1), hook())
        # What such a torch does at the top of each compilation while the device is unregistered:
        for _ in range(2):
            if get_scheduling_for_device("openreg") is None:
                torch.openreg._inductor_backend_init()
        x = torch.randn(8, device="openreg")
        assert torch.allclose(torch.compile(lambda x: x + 1)(x).cpu(), x.cpu() + 1, atol=1e-5)
        print(len(calls))
    """
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    assert out.stdout.split() == ["1"]
