"""Shared helpers for the model tests: train one model on the CPU and on openreg from identical weights, with a
float64 copy on the CPU as the reference that says how far float32 may drift, and compare what comes out.

Tolerances are what the CPU's own float32 rounding allows: for each compared quantity, openreg's float32
result may differ from the CPU's float32 result by at most SLACK times the CPU's float32 error (its largest
absolute difference from the float64 run of the same model on the same data), plus a few float32 ulps of the
quantity's size. Where a quantity is rounding noise in exact arithmetic (a gradient that is zero in theory, or
parameters that AdamW moved by it), the CPU's float32 result is noise too, and so is the allowance.
"""

from __future__ import annotations

import copy
import importlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType

import pytest
import torch

DEVICE = "openreg"
# How many times the CPU's float32 error (against float64) openreg's float32 result may be off the CPU's. openreg
# may round differently from the CPU: a PrivateUse1 device gets SDPA's math path where the CPU runs its flash
# kernel, and optimizers default to their foreach implementations there, as on CUDA. Measured: up to 3.9x (timm's
# ViT, T5 with SDPA).
SLACK = 10.0
# Plus this many float32 ulps of the quantity's largest magnitude, for quantities the CPU gets exactly.
ULPS = 8


def require(name: str) -> ModuleType:
    """The library `name`, or a skip where it is not installed; the nox session sets OPENREG_MODELS_REQUIRE=1,
    where a missing library is an error instead of a skip."""
    if os.environ.get("OPENREG_MODELS_REQUIRE"):
        return importlib.import_module(name)
    return pytest.importorskip(name)


def to(obj, device: str | torch.device, dtype: torch.dtype | None = None):
    """`obj` (a tensor, or a dict/list/tuple of them) on `device`; floating-point tensors cast to `dtype`."""
    if isinstance(obj, torch.Tensor):
        if dtype is not None and obj.is_floating_point():
            return obj.to(device, dtype)
        return obj.to(device)
    if isinstance(obj, Mapping):
        return {k: to(v, device, dtype) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(to(v, device, dtype) for v in obj)
    return obj


def assert_like_cpu(what: str, got: torch.Tensor, cpu: torch.Tensor, ref64: torch.Tensor) -> None:
    """openreg's `got` equals the CPU's float32 `cpu` within what the CPU's own float32 rounding allows (see the
    module docstring); `ref64` is the same quantity from the float64 run. `what` names the model and quantity."""
    got = got.detach().cpu()
    cpu = cpu.detach()
    ref64 = ref64.detach()
    assert got.shape == cpu.shape, f"{what}: shape {tuple(got.shape)} on openreg, {tuple(cpu.shape)} on the CPU"
    assert got.dtype == cpu.dtype, f"{what}: dtype {got.dtype} on openreg, {cpu.dtype} on the CPU"
    if not got.is_floating_point():
        torch.testing.assert_close(got, cpu, rtol=0, atol=0, check_stride=True, msg=lambda m: f"{what}: {m}")
        return
    # Infinities (masked scores) must match exactly; the allowance comes from the finite values.
    finite = torch.isfinite(ref64) & torch.isfinite(cpu)
    cpu_err = (cpu.double() - ref64)[finite].abs().max().item() if finite.any() else 0.0
    scale = ref64[finite].abs().max().item() if finite.any() else 0.0
    atol = SLACK * cpu_err + ULPS * torch.finfo(cpu.dtype).eps * scale
    torch.testing.assert_close(
        got, cpu, rtol=0, atol=atol, check_stride=True,
        msg=lambda m: (f"{what} differs on openreg from the CPU by more than the CPU's float32 rounding allows "
                       f"({SLACK:g} x its error against float64, {cpu_err:.3g}, + {ULPS} ulps of {scale:.3g}):\n{m}"),
    )


@dataclass
class Run:
    """What one training run produced: the loss of each step, every parameter's gradient at the last step,
    the trained model and its optimizer."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    losses: torch.Tensor
    grads: dict[str, torch.Tensor] = field(default_factory=dict)


def train(model: torch.nn.Module, device: str, batches: Iterable, loss_fn: Callable,
          make_optimizer: Callable, dtype: torch.dtype | None = None) -> Run:
    """`model` (already on `device`, in the mode it should train in) trained on `batches` (CPU tensors, moved
    to `device` and, floating-point ones, cast to `dtype`): per step, zero the gradients, loss_fn(model, batch),
    backward, optimizer step. The last step's gradients are kept (before its optimizer step)."""
    optimizer = make_optimizer(model.parameters())
    losses, grads = [], {}
    for batch in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model, to(batch, device, dtype))
        loss.backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
        optimizer.step()
        losses.append(loss.detach())
    return Run(model, optimizer, torch.stack(losses).cpu(), grads)


# The three runs of every comparison: (key, device, dtype to cast floating-point inputs to).
RUNS = (("cpu", "cpu", None), ("dev", DEVICE, None), ("ref", "cpu", torch.float64))


def train_three(model: torch.nn.Module, batches: Iterable, loss_fn: Callable, make_optimizer: Callable,
                check_moved: Callable[[torch.nn.Module], None] | None = None) -> dict[str, Run]:
    """`model` (built on the CPU) trained in train mode on the CPU ("cpu"), a deep copy on openreg ("dev") and a
    deep copy in float64 on the CPU ("ref"), from the same weights on the same batches. `check_moved` is called
    with the openreg copy right after its .to("openreg")."""
    batches = list(batches)
    copies = three_copies(model)
    if check_moved is not None:
        check_moved(copies["dev"])
    runs = {}
    for key, device, dtype in RUNS:
        copies[key].train()
        runs[key] = train(copies[key], device, batches, loss_fn, make_optimizer, dtype)
    return runs


def forward_three(models: Mapping[str, torch.nn.Module], inputs, fn: Callable = lambda m, x: m(x)):
    """fn(model, inputs) for each of the three models of train_three (or three_copies), in eval mode, without
    gradients, `inputs` moved and cast for each."""
    out = {}
    for key, device, dtype in RUNS:
        models[key].eval()
        with torch.no_grad():
            out[key] = fn(models[key], to(inputs, device, dtype))
    assert out["dev"].device.type == DEVICE, f"the openreg model's output is on {out['dev'].device}"
    return out


def three_copies(model: torch.nn.Module) -> dict[str, torch.nn.Module]:
    """The CPU model itself, a deep copy moved to openreg, and a deep copy in float64 on the CPU (the reference)."""
    return {"cpu": model, "dev": copy.deepcopy(model).to(DEVICE), "ref": copy.deepcopy(model).double()}


def compare_runs(name: str, runs: Mapping[str, Run]) -> None:
    """Per-step losses, every last-step gradient, trained parameter and buffer (BatchNorm's running statistics
    and batch counts among them) of the openreg run against the CPU's."""
    dev, cpu, ref = runs["dev"], runs["cpu"], runs["ref"]
    assert_like_cpu(f"{name}: loss per step", dev.losses, cpu.losses, ref.losses)
    assert dev.grads.keys() == cpu.grads.keys(), f"{name}: openreg and the CPU have gradients for different parameters"
    for k, g in cpu.grads.items():
        assert dev.grads[k].device.type == DEVICE, f"{name}: gradient of {k} is on {dev.grads[k].device}"
        assert_like_cpu(f"{name}: gradient of {k} (last step)", dev.grads[k], g, ref.grads[k])
    dev_params, ref_params = dict(dev.model.named_parameters()), dict(ref.model.named_parameters())
    for k, p in cpu.model.named_parameters():
        assert dev_params[k].device.type == DEVICE, f"{name}: parameter {k} is on {dev_params[k].device}"
        assert_like_cpu(f"{name}: parameter {k} after training", dev_params[k], p, ref_params[k])
    dev_bufs, ref_bufs = dict(dev.model.named_buffers()), dict(ref.model.named_buffers())
    for k, b in cpu.model.named_buffers():
        assert dev_bufs[k].device.type == DEVICE, f"{name}: buffer {k} is on {dev_bufs[k].device}"
        assert_like_cpu(f"{name}: buffer {k} after training", dev_bufs[k], b, ref_bufs[k])


def image_batches(steps: int, batch: int = 4, size: int = 32, classes: int = 10, seed: int = 1234,
                  memory_format: torch.memory_format = torch.contiguous_format):
    """`steps` training batches of random images (in `memory_format`) and labels, and one held-out batch of
    images."""
    g = torch.Generator().manual_seed(seed)

    def images():
        return torch.randn(batch, 3, size, size, generator=g).contiguous(memory_format=memory_format)

    batches = [(images(), torch.randint(0, classes, (batch,), generator=g)) for _ in range(steps)]
    return batches, images()


def check_classifier_training(what: str, model: torch.nn.Module, steps: int = 3,
                              memory_format: torch.memory_format = torch.contiguous_format) -> None:
    """An image classifier (10 classes, 32x32 inputs in `memory_format`, batch 4) trained for `steps` SGD steps
    with momentum and weight decay on openreg and on the CPU: losses, gradients, parameters, buffers (BatchNorm's
    running statistics), then the eval-mode logits of a held-out batch."""
    batches, held_out = image_batches(steps, memory_format=memory_format)
    runs = train_three(
        model, batches, lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1]),
        lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4),
    )
    compare_runs(what, runs)
    logits = forward_three({k: r.model for k, r in runs.items()}, held_out)
    assert_like_cpu(f"{what}: eval-mode logits of a held-out batch after training", logits["dev"], logits["cpu"],
                    logits["ref"])
