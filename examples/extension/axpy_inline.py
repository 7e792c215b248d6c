"""A C++ kernel for openreg, built at run time (load_inline), checked against the CPU and through torch.compile.

    python examples/extension/axpy_inline.py          # prints a JSON summary; OPENREG_STRICT=1 works too

The kernel is axpy.cpp (myops::axpy(x, y, a) = a * x + y): one loop for both devices, queued on openreg's current
stream through openreg/extension.h, the surface for kernel authors (README, "Writing kernels for openreg").
"""

from __future__ import annotations

import json
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


def check() -> dict:
    """myops::axpy, however it was built, against the CPU, through torch.compile, and failing in a kernel."""
    x, y = torch.randn(1000, generator=torch.Generator().manual_seed(0)), torch.randn(1000)
    out = torch.ops.myops.axpy(x.to("openreg"), y.to("openreg"), 2.5)
    same = torch.equal(out.cpu(), torch.ops.myops.axpy(x, y, 2.5))

    def fn(x, y):
        return torch.ops.myops.axpy(x.sin(), y, 0.5).relu()

    compiled, code = torch._inductor.utils.run_and_get_code(torch.compile(fn), x.to("openreg"), y.to("openreg"))
    compiled_same = torch.allclose(compiled.cpu(), fn(x, y))
    try:
        torch.ops.myops.axpy(x.to("openreg"), y.to("openreg"), float("nan"))
        torch.openreg.synchronize()
        late_error = None
    except RuntimeError as e:
        late_error = str(e)
    return {"same_as_cpu": same, "compiled_same_as_cpu": compiled_same,
            "extern_call": any("torch.ops.myops.axpy" in c for c in code), "late_error": late_error}


if __name__ == "__main__":
    build()
    print(json.dumps(check()))
