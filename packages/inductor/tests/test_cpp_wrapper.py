"""The C++ wrapper (`torch._inductor.config.cpp_wrapper = True`) on openreg: generated kernels and ATen calls (through
openreg's C shims) on the graph's device and stream. AOTInductor, which uses the same wrapper: test_aot_inductor.py."""

from __future__ import annotations

import subprocess
import sysconfig
import time

import pytest
import torch
import torch._inductor.config as inductor_config
import torch.nn as nn
from compile_helpers import compare_compiled_model
from torch._inductor.utils import run_and_get_code
from torch.utils import cpp_extension

from openreg_inductor.codegen import c_shims


@pytest.fixture(autouse=True)
def _cpp_wrapper():
    torch._dynamo.reset()
    with inductor_config.patch(cpp_wrapper=True):
        yield
    torch._dynamo.reset()


def f(x, scale):
    return (x.sin() * scale + x.cos()).relu().sum(dim=1)


def with_matmul(x, scale):  # mm through openreg's C shim (aoti_torch_openreg_mm_out), between generated kernels
    return ((x.sin() * scale) @ x.T).relu().sum(dim=1)


@pytest.mark.parametrize("fn", [f, with_matmul])
@pytest.mark.parametrize("device", ["openreg:0", "openreg:1"])
def test_cpp_wrapper_runs_kernels_on_the_graphs_device(device, fn):
    x, scale = torch.randn(16, 64), torch.tensor(1.5, dtype=torch.float64)  # a CPU scalar in the graph
    out, (code,) = run_and_get_code(torch.compile(fn), x.to(device), scale)
    assert "openreg_inductor::launch(" in code
    assert out.device == torch.device(device)
    torch.testing.assert_close(out.cpu(), fn(x, scale))
    assert torch.openreg.current_device() == 0


@pytest.mark.parametrize("fn", [f, with_matmul])
def test_cpp_wrapper_calls_return_before_their_kernels_run(fn):
    x, scale = torch.randn(16, 64, device="openreg"), torch.tensor(2.0)
    compiled = torch.compile(fn)
    compiled(x, scale)
    torch.openreg.synchronize()
    torch.openreg._sleep(400_000_000)
    start = time.perf_counter()
    out = compiled(x, scale)
    assert time.perf_counter() - start < 0.2
    torch.testing.assert_close(out.cpu(), fn(x.cpu(), scale))


def test_cpp_wrapper_trains_a_cnn_through_openreg_kernels():
    def make():
        return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                             nn.Linear(4 * 6 * 6, 5))

    codes = compare_compiled_model(make, lambda g: [torch.randn(2, 3, 6, 6, generator=g)], steps=2)
    called = set(c_shims._CALL.findall("".join(codes)))
    assert {"convolution", "convolution_backward", "addmm_out", "mm_out"} <= called, called


def test_an_aten_op_without_a_c_shim_is_a_clear_error():
    with pytest.raises(NotImplementedError, match=r"no C shim for not_an_op.*cpp_wrapper = False"):
        c_shims.definitions(f"{c_shims.PREFIX}not_an_op(x);")


def test_every_c_shim_inductor_may_call_compiles(tmp_path):
    # Graphs define only the shims they call; this compiles all of them (torchgen's inductor_fallback_ops).
    source = tmp_path / "shims.cpp"
    source.write_text(c_shims.definitions("".join(f"{c_shims.PREFIX}{name}(" for name in c_shims._shims())))
    includes = [f"-I{p}" for p in [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]]
    command = ["g++", "-std=c++20", "-fsyntax-only", *includes, str(source)]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
