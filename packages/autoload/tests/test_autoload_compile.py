"""torch.compile without Inductor support for openreg: a clear error naming the fix, never an Inductor
stack trace, while torch.compile on CPU tensors works as usual (before and after)."""

from __future__ import annotations

import pytest

from openreg_runtime.testing import run_python

SCRIPT = """
import sys, torch
def f(x):
    return (x * 2).sin() + 1
print("cpu before", torch.compile(f)(torch.zeros(3)).tolist(), flush=True)
try:
    torch.compile(f)(torch.zeros(3, device="openreg"))
except Exception as exc:
    print("raised", type(exc).__module__, type(exc).__name__, isinstance(exc, RuntimeError), flush=True)
print("cpu after", torch.compile(lambda x: x - 1)(torch.ones(2)).tolist(), flush=True)
print("eager still", (torch.ones(2, device="openreg") * 3).tolist(), flush=True)
# Uncaught, as a user would meet it: what does the traceback show?
torch.compile(f)(torch.ones(3, device="openreg"))
"""


def _expected_message() -> str:
    from openreg import _layers

    if _layers.version(_layers.COMPILE) is None:
        return 'needs the compile layer, which is not installed. Fix: pip install "openreg[compile]"'
    pytest.skip("the compile layer is installed: packages/inductor/tests cover torch.compile on openreg")


def test_compile_on_openreg_says_what_to_install_and_cpu_compile_still_works():
    expected = _expected_message()
    out = run_python(SCRIPT, timeout=900)
    lines = out.stdout.splitlines()
    assert lines[:4] == [
        "cpu before [1.0, 1.0, 1.0]",
        "raised openreg CompileUnavailable True",
        "cpu after [0.0, 0.0]",
        "eager still [3.0, 3.0]",
    ], out.stdout + out.stderr
    assert out.returncode == 1
    traceback = out.stderr
    assert f"openreg.CompileUnavailable: torch.compile on the openreg device {expected}" in traceback
    # The traceback goes from the user's call straight to openreg: no Inductor (or AOT, or Dynamo tracing) frames.
    frames = [line.strip() for line in traceback.splitlines() if line.strip().startswith('File "')]
    assert frames[0].startswith('File "<string>"'), traceback
    assert not [f for f in frames if "_inductor" in f or "_functorch" in f or "convert_frame" in f], traceback
    assert len(frames) <= 4, traceback
