"""torch.autocast("openreg") follows CUDA's op policy; GradScaler works on openreg."""

import warnings

import pytest
import torch
from torch.testing import assert_close

import openreg_eager  # noqa: F401

D = torch.device("openreg")


def _pair(*shape):
    x = torch.randn(*shape)
    return x, x.to(D)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_autocast_dtypes_match_cuda_policy(dtype):
    (a, ad), (b, bd) = _pair(8, 8), _pair(8, 8)
    conv_in, conv_w = torch.randn(1, 3, 8, 8, device=D), torch.randn(4, 3, 3, 3, device=D)
    with torch.autocast("openreg", dtype=dtype):
        assert torch.get_autocast_dtype("openreg") == dtype
        mm = ad @ bd  # lower precision
        conv = torch.nn.functional.conv2d(conv_in, conv_w)  # lower precision
        lin = torch.nn.functional.linear(ad, bd)  # lower precision
        soft = torch.softmax(ad, 0)  # fp32
        exp = torch.exp(mm)  # fp32, even from a low-precision input
        cat = torch.cat([mm, ad])  # promote to the widest input
        added = ad + bd  # untouched: not in any list
    assert (mm.dtype, conv.dtype, lin.dtype) == (dtype, dtype, dtype)
    assert (soft.dtype, exp.dtype, cat.dtype, added.dtype) == (torch.float32,) * 4
    # The low-precision matmul equals a matmul of the rounded inputs, computed on the CPU.
    assert_close(mm.cpu(), (a.to(dtype) @ b.to(dtype)))


def test_autocast_outside_region_and_disabled_is_full_precision():
    _, ad = _pair(4, 4)
    with torch.autocast("openreg", dtype=torch.bfloat16, enabled=False):
        assert (ad @ ad).dtype == torch.float32
    assert (ad @ ad).dtype == torch.float32


def test_autocast_bans_binary_cross_entropy_like_cuda():
    p = torch.rand(4, device=D)
    with torch.autocast("openreg", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            torch.nn.functional.binary_cross_entropy(p, p)


def test_amp_supported_dtypes():
    assert torch.openreg.get_amp_supported_dtype() == [torch.float16, torch.bfloat16, torch.float32]
    assert torch.amp.is_autocast_available("openreg")


def test_autocast_to_float32_is_taken_as_cudas():
    """torch.autocast("cuda", dtype=torch.float32) casts the lower-precision ops' inputs to float32, without a
    warning; openreg's warned that the dtype is not supported and turned autocast off (so a float16 mm stayed
    float16), as for the CPU."""
    a = torch.randn(2, 3, device=D).half()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.autocast("openreg", dtype=torch.float32):
            assert torch.is_autocast_enabled("openreg")
            assert (a @ a.t()).dtype == torch.float32


def _scaled_step(device, grad_fill=None):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device.type if isinstance(device, torch.device) else device, init_scale=1024.0)
    x = torch.ones(3, 4, device=device)
    with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
        loss = model(x).float().sum()
    scaler.scale(loss).backward()
    if grad_fill is not None:
        model.weight.grad.fill_(grad_fill)
    before = [p.detach().cpu().clone() for p in model.parameters()]
    scaler.step(opt)
    scaler.update()
    after = [p.detach().cpu() for p in model.parameters()]
    return before, after, scaler.get_scale()


def test_grad_scaler_steps_like_cpu():
    _, after_dev, scale_dev = _scaled_step("openreg")
    _, after_cpu, scale_cpu = _scaled_step("cpu")
    assert scale_dev == scale_cpu == 1024.0
    for d, c in zip(after_dev, after_cpu, strict=True):
        assert_close(d, c, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_grad_scaler_skips_step_on_non_finite_gradients(bad):
    before, after, scale = _scaled_step("openreg", grad_fill=bad)
    for b, a in zip(before, after, strict=True):
        assert torch.equal(b, a), "the optimizer step should have been skipped"
    assert scale == 512.0  # backed off by the default factor 0.5
