"""Quantization-aware training on openreg: fake quantization and its observers compute what the CPU computes, and
the dtypes CUDA takes where the CPU refuses them (test_workflow_ops.py's CUDA cases) as CUDA does, in float and
rounded once."""

from __future__ import annotations

import pytest
import torch
import torch.ao.quantization as tq
from torch.testing import assert_close

DEV = "openreg"


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _fused(x, running_min, running_max, scale, zero_point, per_channel):
    d = x.device
    return torch.fused_moving_avg_obs_fake_quant(
        x, torch.tensor([1], device=d), torch.tensor([1], device=d), running_min, running_max, scale, zero_point,
        0.01, -128, 127, 0, per_channel, per_channel)


def _state(d, dtype=torch.float32, per_channel=True):
    """Running minimum and maximum (empty per channel, infinite per tensor), scale and zero point."""
    bound = [] if per_channel else [float("inf")]
    running = [torch.tensor(b, dtype=dtype, device=d) for b in (bound, [-v for v in bound])]
    return [*running, torch.ones(1, device=d), torch.zeros(1, dtype=torch.int32, device=d)]


def test_the_per_channel_observer_sizes_its_empty_running_statistics():
    """The kernel resizes the empty running minimum and maximum, scale and zero point to the channels (the default
    x86 QAT weight fake quantization starts so), which the op's meta kernel does not model."""
    x = _x(4, 5)
    got, want = _state(DEV), _state("cpu")
    for step in range(2):
        out_dev = _fused(x.to(DEV) * (step + 1), *got, per_channel=True)
        out_cpu = _fused(x * (step + 1), *want, per_channel=True)
        assert_close(out_dev.cpu(), out_cpu, rtol=0, atol=0)
        for g, w in zip(got, want, strict=True):
            assert_close(g.cpu(), w, rtol=0, atol=0)
    torch.openreg.synchronize()


def test_a_model_trains_with_the_default_x86_qat_configuration():
    def train(d):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                    torch.nn.Flatten(), torch.nn.Linear(64, 2))
        model.qconfig = tq.get_default_qat_qconfig("x86")
        model = tq.prepare_qat(model.train()).to(d)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for step in range(3):
            loss = model(_x(2, 3, 6, 6, seed=step).to(d)).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses, {k: v.cpu() for k, v in model.state_dict().items()}

    (dev_losses, dev_state), (cpu_losses, cpu_state) = train(DEV), train("cpu")
    assert_close(dev_losses, cpu_losses)
    assert dev_state.keys() == cpu_state.keys()
    for key in cpu_state:
        assert_close(dev_state[key], cpu_state[key], msg=key)


def _moved(running, current, dtype):
    """The moving average as CUDA's kernel computes it, each operation rounded to `dtype` (PyTorch's own
    reference in test_workflow_ops.py)."""
    c = torch.tensor(0.01, dtype=dtype).item()
    return torch.where(running.isinf(), current, running + c * (current - running))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("per_channel", "symmetric"), [(False, False), (False, True), (True, False), (True, True)])
def test_the_fused_observer_takes_half_precision_as_cuda_does(dtype, per_channel, symmetric):
    """CUDA's kernel takes float16 and bfloat16, which the CPU's refuses, and keeps its running statistics in that
    dtype. The reference: those statistics computed in the dtype, then the CPU's observer in float32 on them."""
    x = _x(4, 5).to(dtype)
    with pytest.raises(RuntimeError, match="expected scalar type Float"):
        _fused(x, *_state("cpu", dtype, per_channel), per_channel=per_channel)
    got = _state(DEV, dtype, per_channel)
    channels = 4 if per_channel else 1
    running = [torch.full([channels], v, dtype=dtype) for v in (float("inf"), float("-inf"))]
    for step in range(3):
        xs = x * (step + 1)
        out = torch.fused_moving_avg_obs_fake_quant(
            xs.to(DEV), torch.tensor([1], device=DEV), torch.tensor([1], device=DEV), *got, 0.01, 0, 255, 0,
            per_channel, symmetric)
        current = xs.aminmax(dim=1) if per_channel else xs.aminmax()
        running = [_moved(r, c, dtype) for r, c in zip(running, current, strict=True)]
        scale, zero_point = torch.ones(channels), torch.zeros(channels, dtype=torch.int32)
        want = torch.fused_moving_avg_obs_fake_quant(
            xs.float(), torch.tensor([0]), torch.tensor([1]), *[r.float() for r in running], scale, zero_point, 0.01,
            0, 255, 0, per_channel, symmetric)
        assert out.dtype == dtype
        assert_close(out.cpu(), want.to(dtype), rtol=0, atol=0)
        for g, w in zip(got, [*running, scale, zero_point], strict=True):
            assert_close(g.cpu(), w, rtol=0, atol=0)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize(("observer_on", "fake_quant_on"), [(0, 1), (1, 0), (True, False)])
def test_the_half_precision_observer_follows_its_switches(per_channel, observer_on, fake_quant_on):
    """Off, the observer leaves its running statistics and fake quantization its scale, zero point and input."""
    x, start = _x(4, 5).to(torch.bfloat16), [-1.0, 2.0]
    running = [torch.full([4] if per_channel else [1], v, dtype=torch.bfloat16, device=DEV) for v in start]
    scale, zero_point = torch.full([4] if per_channel else [1], 0.5, device=DEV), torch.zeros(
        4 if per_channel else 1, dtype=torch.int32, device=DEV)
    out = torch.fused_moving_avg_obs_fake_quant(
        x.to(DEV), torch.tensor([observer_on], device=DEV), torch.tensor([fake_quant_on], device=DEV), *running,
        scale, zero_point, 0.01, 0, 255, 0, per_channel, False)
    if not observer_on:
        assert [r.unique().item() for r in running] == start
    if not fake_quant_on:
        assert torch.equal(out.cpu(), x)
        assert scale.unique().item() == 0.5 and zero_point.unique().item() == 0


def test_learnable_per_channel_fake_quantization_takes_bfloat16_as_cuda_does():
    """Forward and backward with bfloat16 input, scale and zero point (the CPU's kernel fails an internal assert)."""
    x, scale, zero_point = (t.to(torch.bfloat16) for t in (_x(2, 3, 4), torch.tensor([0.1, 0.05, 0.2]),
                                                         torch.tensor([3.0, 0, -2])))

    def run(d, dtype):
        leaves = [t.detach().to(d, dtype).requires_grad_() for t in (x, scale, zero_point)]
        out = torch._fake_quantize_learnable_per_channel_affine(*leaves, 1, -128, 127, 1.0)
        out.backward(torch.ones_like(out))
        return [out.detach().cpu()] + [leaf.grad.cpu() for leaf in leaves]

    with pytest.raises(RuntimeError):
        run("cpu", torch.bfloat16)
    for got, want in zip(run(DEV, torch.bfloat16), run("cpu", torch.float32), strict=True):
        assert got.dtype == torch.bfloat16
        assert_close(got, want.to(torch.bfloat16), rtol=0, atol=0)
