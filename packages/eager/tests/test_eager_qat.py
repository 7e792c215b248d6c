"""Quantization-aware training on openreg: fake quantization and its observers compute what the CPU computes."""

from __future__ import annotations

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
    empty_or_inf = [] if per_channel else [float("inf")]
    return [torch.tensor(empty_or_inf, dtype=dtype, device=d), torch.tensor([-v for v in empty_or_inf], dtype=dtype,
                                                                            device=d),
            torch.ones(1, device=d), torch.zeros(1, dtype=torch.int32, device=d)]


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
