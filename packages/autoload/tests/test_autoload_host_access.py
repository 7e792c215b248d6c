"""Host access that torch makes through the data pointer, which openreg routes through stream-ordered copies
(`openreg/_torch_patches.py`)."""

import pytest
import torch

import openreg  # noqa: F401  (the device, its layers and torch patches)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.complex64])
def test_byteswap_of_an_openreg_storage_sees_queued_writes_and_matches_the_cpu(dtype):
    values = torch.arange(1, 7).to(dtype)
    x, on_device = torch.zeros(6, dtype=dtype, device="openreg"), values.to("openreg")
    torch.openreg.synchronize()
    torch.openreg._sleep(200_000_000)
    x.copy_(on_device)  # queued behind the sleep
    x.untyped_storage().byteswap(dtype)
    cpu = values.clone()
    cpu.untyped_storage().byteswap(dtype)
    assert torch.equal(x.cpu(), cpu)
    assert not torch.equal(cpu, values)  # the swap did something
