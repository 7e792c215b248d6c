"""Efficient zero tensors (`aten::_efficientzerotensor`, the ZeroTensor dispatch key) on openreg, as on the CPU, CUDA.

Forward-mode AD gives a constant's tangent as one, and some derivative formulas use them: a tensor without memory
that ops read as exact zeros, so that a zero tangent times a NaN or infinite value stays zero. openreg used to make a
dense zero tensor instead, and forward-mode derivatives through NaN or infinity came out NaN where the CPU's did not.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.func import jvp
from torch.testing import assert_close

D = "openreg"
DEVICES = ["cpu", D]

# Functions of x whose derivative multiplies x's tangent by a tensor they hold constant, where x holds NaN and inf.
FUNCTIONS = {
    "mul by a constant": lambda x: x * torch.tensor(2.0, device=x.device),
    "div by an integer": lambda x: x / torch.tensor(2, device=x.device),
    "masked.mean": lambda x: torch.masked.mean(x, mask=torch.tensor([True, True, False, True], device=x.device)),
    "where": lambda x: torch.where(torch.tensor([True, False, True, True], device=x.device), x, x.exp()),
    "addcmul with constants": lambda x: torch.addcmul(x, torch.ones(4, device=x.device), torch.ones(4).to(x.device)),
}


def _zeros(size, device, **kwargs):
    return torch.ops.aten._efficientzerotensor(size, dtype=torch.float32, device=device, **kwargs)


def _x(device):
    return torch.tensor([float("nan"), 1.0, float("inf"), -2.0], device=device)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_forward_mode_derivatives_through_nan_and_inf_match_the_cpu(name):
    """torch.func.jvp and the dual-number API give the CPU's tangents."""
    fn = FUNCTIONS[name]
    want = jvp(fn, (_x("cpu"),), (torch.ones(4),))
    got = jvp(fn, (_x(D),), (torch.ones(4, device=D),))
    for g, w in zip(got, want, strict=True):
        assert g.device.type == D
        assert_close(g.cpu(), w, equal_nan=True)
    with fwAD.dual_level():
        dual = fwAD.make_dual(_x(D), torch.ones(4, device=D))
        tangent = fwAD.unpack_dual(fn(dual)).tangent
    assert_close(tangent.cpu(), want[1], equal_nan=True)


def test_a_zero_tensor_has_no_memory_and_reads_as_zeros():
    torch.openreg.synchronize()
    before = torch.openreg.memory_allocated()
    z = _zeros([2, 3], D)
    assert z._is_zerotensor() and z.device == torch.device(D, 0)
    assert z.data_ptr() == 0 and torch.openreg.memory_allocated() == before
    nan = torch.full((2, 3), float("nan"), device=D)
    assert (z * nan)._is_zerotensor(), "zero times NaN is an exact zero, as on the CPU"
    assert_close((z + nan).cpu(), torch.full((2, 3), float("nan")), equal_nan=True)
    assert_close(z.clone().cpu(), torch.zeros(2, 3))
    assert not z.clone()._is_zerotensor()
    assert_close(z.exp().cpu(), torch.ones(2, 3))


def test_a_zero_tensor_is_immutable_with_the_cpus_error():
    messages = []
    for device in DEVICES:
        with pytest.raises(RuntimeError, match="ZeroTensors are immutable") as e:
            _zeros([3], device).add_(1)
        messages.append(str(e.value))
    assert messages[0] == messages[1]


def test_a_zero_tensor_is_made_on_the_device_asked_for():
    assert _zeros([2], "openreg:1").device == torch.device(D, 1)
    with torch.openreg.device(1):
        z = _zeros([2], D)
    assert z.device == torch.device(D, 1) and z._is_zerotensor()
    assert_close(z.to("openreg:0").cpu(), torch.zeros(2))
