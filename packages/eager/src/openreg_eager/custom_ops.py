"""How to add your own fused kernel to openreg: the example op
``torch.ops.openreg.scaled_silu(x, scale)`` (scale * x * sigmoid(x)).

Its schema and its CPU and openreg kernels are C++ (csrc/custom_ops); here are
the two Python pieces every custom op needs to work with autograd,
FakeTensorMode and torch.compile: a fake kernel (output metadata only) and an
autograd formula.
"""

import torch


@torch.library.register_fake("openreg::scaled_silu")
def _(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output):
    x, scale = inputs
    ctx.save_for_backward(x)
    ctx.scale = scale


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    s = torch.sigmoid(x)
    return grad * ctx.scale * s * (1 + x * (1 - s)), None


torch.library.register_autograd("openreg::scaled_silu", _backward, setup_context=_setup_context)


def scaled_silu(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """scale * x * sigmoid(x), one fused kernel on openreg."""
    return torch.ops.openreg.scaled_silu(x, scale)
