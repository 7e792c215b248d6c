"""A pure-Python custom op for openreg (torch.library.custom_op), with fake and autograd registrations, checked
against the CPU and through torch.compile.

    python examples/extension/custom_op.py          # prints a JSON summary

myops::soft_clip(x, limit) = limit * tanh(x / limit), written with torch ops: on openreg each is queued on the
current stream like any op, so the op needs no C++ at all.
"""

from __future__ import annotations

import json

import torch


@torch.library.custom_op("myops::soft_clip", mutates_args=(), device_types=("cpu", "openreg"))
def soft_clip(x: torch.Tensor, limit: float) -> torch.Tensor:
    return limit * torch.tanh(x / limit)


@soft_clip.register_fake
def _(x, limit):
    return torch.empty_like(x)


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * (1 - torch.tanh(x / ctx.limit) ** 2), None


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.limit = inputs[1]


soft_clip.register_autograd(_backward, setup_context=_setup_context)


def main() -> dict:
    x_cpu = torch.randn(64, generator=torch.Generator().manual_seed(0), dtype=torch.float64).requires_grad_()
    x = x_cpu.detach().to("openreg").requires_grad_()
    out, out_cpu = soft_clip(x, 2.0), soft_clip(x_cpu, 2.0)
    out.sum().backward()
    out_cpu.sum().backward()
    compiled = torch.compile(lambda t: soft_clip(t, 0.5) * 2)(x.detach())
    torch.library.opcheck(soft_clip, (x.detach(), 2.0))
    return {"same_as_cpu": torch.allclose(out.detach().cpu(), out_cpu.detach()),
            "grad_same_as_cpu": torch.allclose(x.grad.cpu(), x_cpu.grad),
            "compiled_same_as_cpu": torch.allclose(compiled.cpu(), soft_clip(x_cpu.detach(), 0.5) * 2)}


if __name__ == "__main__":
    print(json.dumps(main()))
