"""Users' own openreg kernels (examples/extension/): a C++ kernel built at run time (load_inline) and as a wheel
(OpenRegExtension), and a pure-Python custom op, each checked against the CPU and through torch.compile in a fresh
interpreter; and the clear errors of a build that cannot work."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from openreg_runtime import cpp_extension
from openreg_runtime.testing import run_json, run_python

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "extension"
# What axpy_inline.check() reports when myops::axpy behaves.
# "queued": a call returns before its kernel runs, eagerly and compiled (the kernel runs in stream order).
AXPY_OK = {"same_as_cpu": True, "kernel_warnings": ["UserWarning: myops::axpy: a is inf, so no result is finite"],
           "compiled_same_as_cpu": True, "extern_call": True,
           "late_error": "openreg: 'myops::axpy' failed asynchronously on openreg:0 (stream 0): myops::axpy: a is NaN",
           "queued": True, "compiled_queued": True}
# A kernel that reads device memory on the host, outside a launch: what openreg/extension.h says not to do.
PEEK = """
#include <openreg/extension.h>
#include <torch/library.h>

double peek(const at::Tensor& x) { return x.data_ptr<float>()[0]; }

TORCH_LIBRARY(badops, m) { m.def("peek(Tensor x) -> float"); }
TORCH_LIBRARY_IMPL(badops, PrivateUse1, m) { m.impl("peek", &peek); }
"""


@pytest.fixture(scope="module")
def extensions_dir(tmp_path_factory):
    """torch's JIT build folder, shared by this module's runs: the second run loads the first one's build."""
    return str(tmp_path_factory.mktemp("torch_extensions"))


@pytest.mark.parametrize("strict", ["0", "1"])
def test_a_kernel_built_at_run_time_matches_the_cpu(extensions_dir, strict):
    out = run_json(f"""
        import json, sys
        sys.path.insert(0, {str(EXAMPLES)!r})
        import axpy_inline
        axpy_inline.build()
        print(json.dumps(axpy_inline.check()))
    """, env={"TORCH_EXTENSIONS_DIR": extensions_dir, "OPENREG_STRICT": strict})
    assert out == AXPY_OK


def test_a_kernel_built_as_a_wheel_matches_the_cpu(tmp_path):
    project = shutil.copytree(EXAMPLES, tmp_path / "project")  # the build writes into its source folder
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", str(project),
                    "-w", str(tmp_path / "dist")], check=True, capture_output=True, text=True)
    (wheel,) = (tmp_path / "dist").glob("openreg_axpy-*.whl")
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    out = run_json(f"""
        import json, sys
        sys.path[:0] = [{str(tmp_path / "site")!r}, {str(EXAMPLES)!r}]
        import openreg_axpy, axpy_inline
        print(json.dumps(axpy_inline.check()))
    """)
    assert out == AXPY_OK


def test_a_python_custom_op_matches_the_cpu():
    out = run_json(f"""
        import json, runpy
        print(json.dumps(runpy.run_path({str(EXAMPLES / "custom_op.py")!r})["main"]()))
    """)
    assert out == {"same_as_cpu": True, "grad_same_as_cpu": True, "compiled_same_as_cpu": True}


def test_a_kernel_reading_device_memory_outside_a_launch_faults_in_strict_mode_saying_so(extensions_dir):
    out = run_python(f"""
        import torch
        from openreg_runtime import cpp_extension
        cpp_extension.load_inline("openreg_test_peek", {PEEK!r}, is_python_module=False)
        x = torch.ones(4, device="openreg")
        # While a kernel runs, its memory is open to every thread: the read must not race the fill.
        torch.openreg.synchronize()
        print(torch.ops.badops.peek(x))  # line 8
    """, env={"TORCH_EXTENSIONS_DIR": extensions_dir, "OPENREG_STRICT": "1"})
    assert out.returncode != 0 and out.stdout == "", (out.stdout, out.stderr[-3000:])
    for words in ["strict mode: the host touched device memory outside a kernel or copy",
                  "a C++ extension reads it inside openreg::ext::launch", "line 8"]:
        assert words in out.stderr, out.stderr[-3000:]


def test_building_against_another_torch_release_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(cpp_extension, "_BUILT_FOR", "2.0.0")
    with pytest.raises(RuntimeError, match=r"built for torch 2\.0\.0 but torch .* installed.*Install torch==2\.0\.0"):
        cpp_extension.load_inline("never_built", "")


def test_a_missing_compiler_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler")
    with pytest.raises(RuntimeError, match="no C\\+\\+ compiler: 'no-such-compiler'"):
        cpp_extension.OpenRegExtension("never_built", ["missing.cpp"])
