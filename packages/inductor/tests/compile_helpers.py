"""Shared helpers for the openreg-inductor tests: run the same computation eagerly on the CPU and
compiled on openreg, and compare everything that comes out of it (outputs, input and parameter
gradients, buffers). The reference is always computed here, never copied from an openreg run."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence
from unittest import mock

import torch
import torch.nn as nn

from openreg_runtime import testing

DEVICE = "openreg"
# float32, but compiled kernels may fuse and reorder reductions differently from eager ATen kernels.
TOL = dict(atol=1e-4, rtol=1e-4)
# What the wrapper code of a graph whose kernels openreg launches calls (openreg_inductor.launch).
OPENREG_LOADER = "openreg_cpp_pybinding("


def reset() -> None:
    """A clean slate for one test: no compiled code from the previous one, openreg:0 current, default
    streams current on every device."""
    torch._dynamo.reset()
    testing.restore_device_state()


@contextlib.contextmanager
def generated_code() -> Iterator[list[str]]:
    """Collects the wrapper code of each graph Inductor compiles (or loads from its cache) meanwhile."""
    from torch._inductor.graph import GraphLowering

    codes: list[str] = []
    with mock.patch.object(GraphLowering, "save_output_code", codes.append):
        yield codes


def assert_openreg_kernels(codes: Sequence[str], expected_graphs: int = 1) -> None:
    """At least `expected_graphs` graphs were compiled, and openreg launched generated kernels in one."""
    assert len(codes) >= expected_graphs, f"expected {expected_graphs} Inductor graph(s), got {len(codes)}"
    assert any(OPENREG_LOADER in code for code in codes), "no graph launched a generated kernel on openreg"


def to_device(value, device):
    """Moves every tensor of a (nested) tuple/list/dict to `device`, keeping requires_grad leaves leaves."""
    if isinstance(value, torch.Tensor):
        moved = value.detach().to(device)
        return moved.requires_grad_(value.requires_grad)
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def assert_close_cpu(got, expected, *, what: str = "output", **tol) -> None:
    """assert_close on (nested) results, got on any device, expected on the CPU; devices are not compared."""
    tol = tol or TOL
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{what}: expected a tensor, got {type(got).__name__}"
        torch.testing.assert_close(got.detach().cpu(), expected.detach(), **tol, msg=lambda m: f"{what}: {m}")
    elif isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected), f"{what}: structure differs"
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_close_cpu(g, e, what=f"{what}[{i}]", **tol)
    else:
        assert got == expected, f"{what}: {got!r} != {expected!r}"


def _flat_tensors(value) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _grad_outputs(outputs, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(t.shape, generator=g, dtype=t.dtype) for t in _flat_tensors(outputs)
            if t.requires_grad and t.is_floating_point()]


def _forward_backward(model: nn.Module | Callable, inputs: Sequence, seed: int):
    """One forward and backward (with fixed random output gradients); returns the outputs, detached."""
    out = model(*inputs)
    diff = [t for t in _flat_tensors(out) if t.requires_grad and t.is_floating_point()]
    grads = [g.to(t.device) for g, t in zip(_grad_outputs(out, seed), diff, strict=True)]
    if diff:
        torch.autograd.backward(diff, grads)
    return torch.utils._pytree.tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, out)


def compare_compiled_model(
    make: Callable[[], nn.Module],
    make_inputs: Callable[[torch.Generator], Sequence],
    *,
    steps: int = 2,
    train: bool = True,
    compile_kwargs: dict | None = None,
    tol: dict | None = None,
) -> list[str]:
    """Runs `make()` eagerly on the CPU and a deep copy of it compiled on openreg, `steps` times forward
    and backward on the same inputs (gradients accumulate across steps), then compares per step the
    outputs and input gradients, and at the end parameter gradients and buffers (e.g. BatchNorm's running
    statistics). Returns the wrapper code of the compiled graphs."""
    tol = tol or TOL
    torch.manual_seed(0)
    cpu_model = make().train(train)
    dev_model = copy.deepcopy(cpu_model).to(DEVICE)
    compiled = torch.compile(dev_model, **(compile_kwargs or {}))

    g = torch.Generator().manual_seed(1234)
    with generated_code() as codes:
        for step in range(steps):
            cpu_inputs = list(make_inputs(g))
            dev_inputs = to_device(cpu_inputs, DEVICE)
            expected = _forward_backward(cpu_model, cpu_inputs, seed=step)
            got = _forward_backward(compiled, dev_inputs, seed=step)
            for t in _flat_tensors(got):
                assert t.device.type == DEVICE, f"step {step}: an output is on {t.device}"
            assert_close_cpu(got, expected, what=f"step {step} output", **tol)
            for i, (ci, di) in enumerate(zip(cpu_inputs, dev_inputs, strict=True)):
                if isinstance(ci, torch.Tensor) and ci.requires_grad:
                    assert di.grad is not None, f"step {step}: input {i} got no gradient"
                    assert di.grad.device == di.device
                    assert_close_cpu(di.grad, ci.grad, what=f"step {step} input {i} grad", **tol)
        torch.openreg.synchronize()

    cpu_params, dev_params = dict(cpu_model.named_parameters()), dict(dev_model.named_parameters())
    assert cpu_params.keys() == dev_params.keys()
    for name, ref in cpu_params.items():
        got = dev_params[name]
        assert got.device.type == DEVICE
        if ref.grad is None:
            assert got.grad is None, f"{name}: has a gradient on openreg only"
            continue
        assert got.grad is not None, f"{name}: no gradient on openreg"
        assert got.grad.device == got.device
        assert_close_cpu(got.grad, ref.grad, what=f"{name}.grad", **tol)

    cpu_buffers, dev_buffers = dict(cpu_model.named_buffers()), dict(dev_model.named_buffers())
    assert cpu_buffers.keys() == dev_buffers.keys()
    for name, ref in cpu_buffers.items():
        assert dev_buffers[name].device.type == DEVICE
        assert_close_cpu(dev_buffers[name], ref, what=f"buffer {name}", **tol)
    return codes
