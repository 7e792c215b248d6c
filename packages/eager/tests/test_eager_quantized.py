"""Quantized tensors on openreg behave as on the CPU: each case runs the same call on both devices and compares
dtype, shape, quantization scheme and parameters, the stored integers (int_repr) exactly and the dequantized
values."""

from __future__ import annotations

import copy
import io

import pytest
import torch

DEV = "openreg"


# torch warns that quantized dtypes are deprecated.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def x(d):
    return torch.linspace(-2, 2, 12, device=d).reshape(3, 4)


def per_tensor(d, dtype=torch.quint8):
    return torch.quantize_per_tensor(x(d), 0.05, 3 if dtype != torch.qint8 else -2, dtype)


def per_channel(d, scales_dtype=torch.float64, axis=0):
    n = x(d).shape[axis]
    scales = torch.tensor([0.1, 0.02, 0.3, 0.04][:n], device=d, dtype=scales_dtype)
    return torch.quantize_per_channel(x(d), scales, torch.tensor([1, 2, 3, 0][:n], device=d), axis, torch.quint8)


def params(q: torch.Tensor) -> dict:
    if q.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        return {"scale": q.q_scale(), "zero_point": q.q_zero_point()}
    return {"scales": q.q_per_channel_scales().cpu(), "zero_points": q.q_per_channel_zero_points().cpu(),
            "axis": q.q_per_channel_axis()}


def assert_same(fn):
    cpu, dev = fn("cpu"), fn(DEV)
    cpu_list, dev_list = (cpu, dev) if isinstance(cpu, (tuple, list)) else ([cpu], [dev])
    for c, d in zip(cpu_list, dev_list, strict=True):
        if not isinstance(c, torch.Tensor):
            assert d == c
            continue
        assert d.device.type == DEV
        assert (d.dtype, d.shape, d.stride(), d.is_quantized) == (c.dtype, c.shape, c.stride(), c.is_quantized)
        if c.is_quantized:
            assert d.qscheme() == c.qscheme()
            got, want = params(d), params(c)
            assert got.keys() == want.keys()
            for key in want:
                torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, msg=key)
            torch.testing.assert_close(d.int_repr().cpu(), c.int_repr(), rtol=0, atol=0)
            torch.testing.assert_close(d.dequantize().cpu(), c.dequantize(), rtol=0, atol=0)
        else:
            torch.testing.assert_close(d.cpu(), c, rtol=0, atol=0)


def _saved_and_loaded(q, map_location=None):
    buffer = io.BytesIO()
    torch.save(q, buffer)
    buffer.seek(0)
    return torch.load(buffer, map_location=map_location)


CASES = {
    "per_tensor_quint8": lambda d: per_tensor(d),
    "per_tensor_qint8": lambda d: per_tensor(d, torch.qint8),
    "per_tensor_qint32": lambda d: per_tensor(d, torch.qint32),
    "per_tensor_tensor_qparams": lambda d: torch.quantize_per_tensor(
        x(d), torch.tensor(0.05, device=d), torch.tensor(3, device=d), torch.quint8),
    "per_tensor_dynamic": lambda d: torch.quantize_per_tensor_dynamic(x(d), torch.quint8, False),
    "per_channel": lambda d: per_channel(d),
    "per_channel_float_scales": lambda d: per_channel(d, torch.float32),
    "per_channel_axis1": lambda d: per_channel(d, axis=1),
    "int_repr": lambda d: per_tensor(d).int_repr(),
    "dequantize": lambda d: per_channel(d).dequantize(),
    "parameters": lambda d: (per_tensor(d).q_scale(), per_tensor(d).q_zero_point(), per_channel(d).q_per_channel_axis(),
                             per_channel(d).q_per_channel_scales(), per_channel(d).q_per_channel_zero_points()),
    "transpose": lambda d: per_tensor(d).t(),
    "slice": lambda d: per_tensor(d)[1:, ::2],
    "relu": lambda d: torch.relu(per_tensor(d)),
    "cat": lambda d: torch.cat([per_tensor(d), per_tensor(d)], 1),
    "quantized_add": lambda d: torch.ops.quantized.add(per_tensor(d), per_tensor(d), 0.1, 0),
    "copy_from_float": lambda d: per_tensor(d).copy_(x(d) * 0.5),
    "make_per_tensor": lambda d: torch._make_per_tensor_quantized_tensor(
        torch.arange(12, device=d, dtype=torch.uint8).reshape(3, 4), 0.5, 2),
    "saved_and_loaded": lambda d: _saved_and_loaded(per_tensor(d, torch.qint8)),
    "per_channel_saved_and_loaded": lambda d: _saved_and_loaded(per_channel(d)),
    "deepcopy": lambda d: copy.deepcopy(per_tensor(d, torch.qint32)),
    "per_channel_deepcopy": lambda d: copy.deepcopy(per_channel(d, axis=1)),
    "set_storage": lambda d: torch._empty_affine_quantized([4], scale=0.05, zero_point=3, dtype=torch.quint8,
                                                           device=d).set_(per_tensor(d).untyped_storage(), 2, [4], [2]),
    "empty_affine": lambda d: torch._empty_affine_quantized([2, 3], scale=0.5, zero_point=1, dtype=torch.quint8,
                                                             device=d).q_scale(),
}


@pytest.mark.parametrize("case", CASES)
def test_same_as_cpu(case):
    assert_same(CASES[case])


@pytest.mark.parametrize("make", [per_tensor, per_channel], ids=["per_tensor", "per_channel"])
def test_copies_between_devices(make):
    assert_same(lambda d: make("cpu").to(d))
    back, want = make(DEV).cpu(), make("cpu")
    assert back.device.type == "cpu" and back.qscheme() == want.qscheme()
    for key, w in params(want).items():
        got = params(back)[key]
        if isinstance(got, torch.Tensor):
            assert got.device.type == "cpu", f"{key} of a CPU tensor must not live in device memory"
        torch.testing.assert_close(got, w, rtol=0, atol=0)
    torch.testing.assert_close(back.int_repr(), want.int_repr(), rtol=0, atol=0)
    torch.testing.assert_close(back.dequantize(), want.dequantize(), rtol=0, atol=0)


@pytest.mark.parametrize("make", [per_tensor, per_channel], ids=["per_tensor", "per_channel"])
def test_a_cpu_checkpoint_loads_onto_the_device(make):
    """torch.load rebuilds a quantized tensor on its storage's device (set_ of a storage), as on CUDA."""
    assert_same(lambda d: _saved_and_loaded(make("cpu"), map_location=d))


def test_printing():
    def words(t):  # the device line wraps where the CPU's does not
        return " ".join(str(t).split())

    assert words(per_tensor(DEV)) == words(per_tensor("cpu")).replace("size=", f"device='{DEV}:0', size=")


def _raised(fn, d):
    with pytest.raises(Exception) as info:
        fn(d)
        torch.openreg.synchronize()
    return info


ERRORS = {
    "cat_per_channel": lambda d: torch.cat([per_channel(d), per_channel(d)]),
    "copy_to_float": lambda d: x(d).copy_(per_tensor(d)),
    # _to_copy asks for a quantized tensor of the float dtype, which the factories refuse
    "to_float": lambda d: per_tensor(d).to(torch.float32),
    "per_channel_to_float": lambda d: per_channel(d).to(torch.float32),
    "factory_without_a_quantized_dtype": lambda d: torch._empty_affine_quantized([2], device=d),
    "quantize_int": lambda d: torch.quantize_per_tensor(torch.ones(3, dtype=torch.int32, device=d), 0.1, 0,
                                                        torch.quint8),
}


@pytest.mark.parametrize("case", ERRORS)
def test_errors_match_the_cpu(case):
    fn = ERRORS[case]
    cpu, dev = _raised(fn, "cpu"), _raised(fn, DEV)
    assert (dev.type, str(dev.value).split("\n")[0]) == (cpu.type, str(cpu.value).split("\n")[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_dequantize_of_a_dense_tensor_is_its_float32_form_as_on_the_cpu(dtype):
    """A float32 tensor's dequantize() is the tensor itself (ATen's kernel for the CPU and CUDA: self.to(float32)),
    so writes through it reach the tensor; other dtypes give a float32 copy."""
    def outcome(d):
        t = torch.arange(3, device=d).to(dtype)
        result = t.dequantize()
        result.add_(1)
        return result is t, result.dtype, t.cpu()

    dev, cpu = outcome(DEV), outcome("cpu")
    assert dev[:2] == cpu[:2]
    torch.testing.assert_close(dev[2], cpu[2], rtol=0, atol=0)
