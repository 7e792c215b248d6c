"""A C++ kernel for openreg, built at run time (load_inline), checked against the CPU and through torch.compile.

    python examples/extension/axpy_inline.py          # prints a JSON summary; OPENREG_STRICT=1 works too

The kernel is axpy.cpp (myops::axpy(x, y, a) = a * x + y): one loop for both devices, queued on openreg's current
stream through openreg/extension.h, the surface for kernel authors (README, "Writing kernels for openreg").
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import torch

from openreg_runtime import cpp_extension

SOURCE = Path(__file__).with_name("axpy.cpp")


def _fake(x, y, a):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def build() -> None:
    """Compiles and loads the kernel (torch caches the build); registers its fake kernel for torch.compile."""
    cpp_extension.load_inline("openreg_example_axpy", SOURCE.read_text(), is_python_module=False)
    torch.library.register_fake("myops::axpy")(_fake)


def _queued(fn, *args) -> bool:
    """Whether fn(*args) returns before the stream reaches its work: it is queued behind 300 ms of other work."""
    torch.openreg.synchronize()
    torch.openreg._sleep(300_000_000)
    start = time.perf_counter()
    fn(*args)
    returned = time.perf_counter() - start
    torch.openreg.synchronize()
    return returned < 0.15


def _kernel_warnings(x, y) -> list[str]:
    """What axpy with an infinite `a` warns: the kernel warns on the stream's worker, and the warning reaches this
    thread's `warnings` when it next calls into openreg (here, reading the result). (Called through torch.ops, the
    CPU kernel's warning goes to stderr: torch.ops calls do not turn C++ warnings into Python's.)"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.ops.myops.axpy(x.to("openreg"), y.to("openreg"), float("inf")).cpu()
    return [f"{w.category.__name__}: {str(w.message).split(' (Triggered internally')[0]}" for w in caught]


def check() -> dict:
    """myops::axpy, however it was built, against the CPU, through torch.compile, and failing in a kernel."""
    x, y = torch.randn(1000, generator=torch.Generator().manual_seed(0)), torch.randn(1000)
    out = torch.ops.myops.axpy(x.to("openreg"), y.to("openreg"), 2.5)
    same = torch.equal(out.cpu(), torch.ops.myops.axpy(x, y, 2.5))

    def fn(x, y):
        return torch.ops.myops.axpy(x.sin(), y, 0.5).relu()

    compiled_fn = torch.compile(fn)
    compiled, code = torch._inductor.utils.run_and_get_code(compiled_fn, x.to("openreg"), y.to("openreg"))
    # Inductor's sin may round differently from ATen's by an ulp: torch.testing's float32 tolerances.
    compiled_same = torch.allclose(compiled.cpu(), fn(x, y), rtol=1.3e-6, atol=1e-5)
    try:
        torch.ops.myops.axpy(x.to("openreg"), y.to("openreg"), float("nan"))
        torch.openreg.synchronize()
        late_error = None
    except RuntimeError as e:
        late_error = str(e)
    return {"same_as_cpu": same, "kernel_warnings": _kernel_warnings(x, y), "compiled_same_as_cpu": compiled_same,
            "extern_call": any("torch.ops.myops.axpy" in c for c in code), "late_error": late_error,
            "queued": _queued(torch.ops.myops.axpy, x.to("openreg"), y.to("openreg"), 2.5),
            "compiled_queued": _queued(compiled_fn, x.to("openreg"), y.to("openreg"))}


if __name__ == "__main__":
    build()
    print(json.dumps(check()))
