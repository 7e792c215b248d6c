"""`openreg demo`: trains a small model on openreg and on the CPU, and compares the two runs.

Eagerly first, then with torch.compile when the compile layer is installed. Both devices start
from the same weights and see the same batches, so their losses and final weights must agree
within a float32 tolerance; the demo exits 1 when they do not, or when the loss does not fall.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import torch
from torch import nn

from . import _compile

SAMPLES, FEATURES, CLASSES, BATCH = 4096, 16, 4, 128
TOLERANCE = 1e-4


class Run(NamedTuple):
    losses: list[float]
    weights: list[torch.Tensor]
    seconds: float


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    """Points labelled by a random teacher network: learnable, and the same on every run."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    teacher = torch.randn(FEATURES, CLASSES, generator=g)
    return x, (torch.tanh(x) @ teacher).argmax(dim=1)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, CLASSES))


def train(device: str, epochs: int, compiled: bool = False, report=None) -> Run:
    x, y = (t.to(device) for t in _data())
    model = _model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step_model = torch.compile(model) if compiled else model
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    start = time.perf_counter()
    for epoch in range(epochs):
        total = torch.zeros((), device=device)
        for i in range(0, SAMPLES, BATCH):
            opt.zero_grad()
            loss = loss_fn(step_model(x[i:i + BATCH]), y[i:i + BATCH])
            loss.backward()
            opt.step()
            total += loss.detach()
        losses.append(total.item() / (SAMPLES // BATCH))  # .item() synchronises once per epoch
        if report:
            report(epoch, losses[-1])
    seconds = time.perf_counter() - start
    return Run(losses, [p.detach().cpu() for p in model.parameters()], seconds)


def _compare(name: str, device: str, epochs: int, compiled: bool) -> bool:
    print(f"\n{name}")
    for warm_up in ("cpu", device):  # first use pays for imports, worker threads, allocator caches, compiling
        train(warm_up, 1, compiled)
    reference = train("cpu", epochs, compiled)

    def report(epoch: int, loss: float) -> None:
        cpu = reference.losses[epoch]
        print(f"  epoch {epoch + 1}/{epochs}  loss {loss:.4f}   (cpu {cpu:.4f}, |diff| {abs(loss - cpu):.1e})",
              flush=True)

    run = train(device, epochs, compiled, report)
    loss_diff = max(abs(a - b) for a, b in zip(run.losses, reference.losses, strict=True))
    weight_diff = max((a - b).abs().max().item() for a, b in zip(run.weights, reference.weights, strict=True))
    ratio = run.seconds / reference.seconds
    print(f"  time: {device} {run.seconds:.2f} s, cpu {reference.seconds:.2f} s ({ratio:.2f}x the CPU's time)")
    ok = True
    if max(loss_diff, weight_diff) <= TOLERANCE:
        print(f"  same results as the CPU: max |loss diff| {loss_diff:.1e}, max |weight diff| {weight_diff:.1e} "
              f"(tolerance {TOLERANCE:g})")
    else:
        print(f"  MISMATCH with the CPU: max |loss diff| {loss_diff:.1e}, max |weight diff| {weight_diff:.1e} "
              f"(tolerance {TOLERANCE:g})")
        ok = False
    if epochs > 1 and not run.losses[-1] < run.losses[0]:
        print(f"  the loss did not fall: {run.losses[0]:.4f} -> {run.losses[-1]:.4f}")
        ok = False
    return ok


def demo(epochs: int = 5, device: str | torch.device = "openreg") -> int:
    if epochs < 1:
        raise SystemExit("openreg demo: --epochs must be at least 1")
    try:
        name = torch.openreg.get_device_name(device)
    except (RuntimeError, ValueError) as exc:  # not an openreg device, or an index past OPENREG_DEVICE_COUNT
        raise SystemExit(f"openreg demo: --device {device}: {exc}") from None
    device = str(torch.device(device))
    params = sum(p.numel() for p in _model().parameters())
    print(f"openreg demo: an MLP ({params} parameters) learns to classify {SAMPLES} points, {epochs} epochs of "
          f"{SAMPLES // BATCH} batches")
    print(f"on {device}, {name}; compared with the same run on the CPU")
    ok = _compare("eager", device, epochs, compiled=False)
    if _compile.supported():
        ok = _compare("compiled (torch.compile)", device, epochs, compiled=True) and ok
    else:
        print(f"\ncompiled (torch.compile): skipped. {_compile.reason()}")
    print("\nDone." if ok else "\nFAILED: openreg and the CPU disagree (see above).")
    return 0 if ok else 1
