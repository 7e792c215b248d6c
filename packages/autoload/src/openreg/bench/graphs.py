"""The graphs suite (issue 18): replaying captured work against the CPU running the same work eagerly."""

import torch
from torch import nn

from .harness import Case, Suite, mlp

# 1000 small element-wise ops, in place, so that replays keep working on the same memory.
OPS = "for _ in range(500): x{s}.mul_(0.999).add_(0.001)"
# set_to_none=False: a replay writes the gradients that were captured.
STEP = "opt{s}.zero_grad(set_to_none=False); loss_fn{s}(model{s}(x{s}), y{s}).backward(); opt{s}.step()"
REPLAY = "graph.replay(); torch.openreg.synchronize()"


def _captured(stmt: str, env: dict) -> torch.openreg.OpenRegGraph:
    """`stmt` captured in a graph after a warm-up on a side stream, as PyTorch's recipe for CUDA graphs does."""
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        exec(stmt, env)
    torch.openreg.current_stream().wait_stream(side)
    graph = torch.openreg.OpenRegGraph()
    with torch.openreg.graph(graph):
        exec(stmt, env)
    return graph


def _training(device: str, suffix: str) -> dict:
    torch.manual_seed(0)
    model = mlp().to(device)
    env = {"model": model, "x": torch.rand(64, 256, device=device), "y": torch.randint(0, 10, (64,), device=device),
           "opt": torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9), "loss_fn": nn.CrossEntropyLoss()}
    return {name + suffix: value for name, value in env.items()}


def cases() -> list[Case]:
    ops = {"torch": torch, "x": torch.rand(1024, device="openreg"), "x_cpu": torch.rand(1024)}
    ops["graph"] = _captured(OPS.format(s=""), ops)
    step = {"torch": torch, **_training("openreg", ""), **_training("cpu", "_cpu")}
    step["graph"] = _captured(STEP.format(s=""), step)
    return [
        Case("replay of 1000 small element-wise ops, then sync", REPLAY, OPS.format(s="_cpu"), ops, "<= 0.5x"),
        Case("MLP training step replayed", REPLAY, STEP.format(s="_cpu"), step, "report"),
    ]


def versions() -> dict[str, str]:
    import openreg_eager

    return {"torch": torch.__version__, "openreg-eager": openreg_eager.__version__}


SUITE = Suite("graphs", "openreg graph replay vs the CPU running the same work eagerly", cases, versions)
