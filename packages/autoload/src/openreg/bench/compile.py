"""The compile suite: torch.compile on openreg against torch.compile on the CPU (needs openreg[compile])."""

import copy

import torch
from torch import nn

from .harness import Case, Suite, mlp


class _Block(nn.Module):
    """A pre-norm transformer block: attention through scaled_dot_product_attention, then an MLP."""

    def __init__(self, dim: int = 128, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


STEP = "loss = model(x).square().mean(); loss.backward()"
FIRST = "torch._dynamo.reset()\nwith fresh_cache(): torch.compile(fn)(x)"


def _fn(x):
    return (x.sin() * x.cos() + x).relu().sum(dim=-1).softmax(dim=0)


def cases() -> list[Case]:
    from torch._inductor.utils import fresh_cache

    sync = "; torch.openreg.synchronize()"
    cases = []
    for name, make, x in [("MLP", mlp, torch.rand(64, 256)), ("transformer block", _Block, torch.rand(8, 64, 128))]:
        torch.manual_seed(0)
        model = make()
        env = {"torch": torch, "model": torch.compile(copy.deepcopy(model).to("openreg")), "x": x.to("openreg"),
               "model_cpu": torch.compile(model), "x_cpu": x}
        cpu_step = STEP.replace("model", "model_cpu").replace("(x)", "(x_cpu)")
        cases.append(Case(f"compiled {name} fwd+bwd", STEP + sync, cpu_step, env, "<= 1.1x"))
    x = torch.rand(256, 256)
    env = {"torch": torch, "fresh_cache": fresh_cache, "fn": _fn, "x": x.to("openreg"), "x_cpu": x}
    cases.append(Case("first compilation", FIRST + "\ntorch.openreg.synchronize()", FIRST.replace("(x)", "(x_cpu)"),
                      env, "<= 1.3x", runs=2))
    return cases


def versions() -> dict[str, str]:
    import openreg_inductor

    return {"torch": torch.__version__, "openreg-inductor": openreg_inductor.__version__}


SUITE = Suite("compile", "openreg torch.compile vs CPU torch.compile", cases, versions)
