"""The C++ wrapper (`torch._inductor.config.cpp_wrapper = True`) on openreg, and what it and AOTInductor
cannot do yet, said clearly."""

from __future__ import annotations

import time

import pytest
import torch
import torch._inductor.config as inductor_config
from torch._inductor.utils import run_and_get_code


@pytest.fixture(autouse=True)
def _cpp_wrapper():
    torch._dynamo.reset()
    with inductor_config.patch(cpp_wrapper=True):
        yield
    torch._dynamo.reset()


def f(x, scale):
    return (x.sin() * scale + x.cos()).relu().sum(dim=1)


@pytest.mark.parametrize("device", ["openreg:0", "openreg:1"])
def test_cpp_wrapper_runs_kernels_on_the_graphs_device(device):
    x, scale = torch.randn(16, 64), torch.tensor(1.5, dtype=torch.float64)  # a CPU scalar in the graph
    out, (code,) = run_and_get_code(torch.compile(f), x.to(device), scale)
    assert "openreg_inductor::launch(" in code
    assert out.device == torch.device(device)
    torch.testing.assert_close(out.cpu(), f(x, scale))
    assert torch.openreg.current_device() == 0


def test_cpp_wrapper_calls_return_before_their_kernels_run():
    x, scale = torch.randn(16, 64, device="openreg"), torch.tensor(2.0)
    compiled = torch.compile(f)
    compiled(x, scale)
    torch.openreg.synchronize()
    torch.openreg._sleep(400)
    start = time.perf_counter()
    out = compiled(x, scale)
    assert time.perf_counter() - start < 0.2
    torch.testing.assert_close(out.cpu(), f(x.cpu(), scale))


def test_cpp_wrapper_says_it_cannot_call_aten_ops_yet():
    x = torch.randn(8, 8, device="openreg")
    with pytest.raises(Exception, match=r"openreg's C\+\+ wrapper cannot call mm_out yet.*cpp_wrapper = False"):
        torch.compile(lambda a: a @ a + 1)(x)


def test_aot_inductor_says_it_cannot_package_for_openreg():
    class Model(torch.nn.Module):
        def forward(self, x):
            return x.sin() + 1

    x = torch.randn(8, device="openreg")
    exported = torch.export.export(Model(), (x,))
    with pytest.raises(Exception, match="AOTInductor cannot package a model for the openreg device"):
        torch._inductor.aoti_compile_and_package(exported)
