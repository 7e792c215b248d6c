"""DLPack (patch 13 of openreg/_torch_patches.py): `torch.from_dlpack` takes an openreg tensor as the CPU's takes a
CPU tensor — the same memory, dtype, shape and strides — and `__dlpack_device__` names the device torch's own C++
gives a PrivateUse1 device (`torch._C._torchDeviceToDLDevice`), where torch 2.13/2.14 raised ValueError."""

import pytest
import torch

import openreg  # noqa: F401  (the device, its layers and torch patches)

DTYPES = [torch.bool, torch.uint8, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.complex64]


@pytest.mark.parametrize("device", ["openreg:0", "openreg:1"])
def test_the_dlpack_device_is_the_one_torchs_cpp_gives(device):
    x = torch.ones(2, device=device)
    assert x.__dlpack_device__() == torch._C._torchDeviceToDLDevice(torch.device(device))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_from_dlpack_shares_the_tensor_as_on_the_cpu(dtype):
    cpu = torch.arange(24).reshape(4, 6).to(dtype)[:, 1::2]  # not contiguous
    for x in (cpu, cpu.to("openreg")):
        y = torch.from_dlpack(x)
        assert (y.device, y.dtype, y.shape, y.stride()) == (x.device, x.dtype, x.shape, x.stride())
        assert y.data_ptr() == x.data_ptr()
        torch.testing.assert_close(y.cpu(), cpu)


def test_from_dlpack_copies_across_devices_when_asked():
    x = torch.arange(6.0, device="openreg")
    moved = torch.from_dlpack(x, device="cpu", copy=True)
    assert moved.device.type == "cpu"
    torch.testing.assert_close(moved, torch.arange(6.0))
    with pytest.raises(ValueError, match="without copying"):
        torch.from_dlpack(x, device="cpu", copy=False)
