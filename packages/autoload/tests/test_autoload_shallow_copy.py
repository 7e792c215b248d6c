"""`module.to("openreg")` keeps a module's Parameter objects, as `.to("cuda")` does (openreg._torch_patches, item 8):
tied weights stay tied, an optimizer built before the move steps the moved parameters, held references follow.

torch 2.13 and 2.14 do not count PrivateUse1 as a dense backend whose tensors may swap data with the CPU's
(`_has_compatible_shallow_copy_type`), so without the patch `nn.Module._apply` builds new Parameters."""

from __future__ import annotations

import contextlib
import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from openreg import _torch_patches
from openreg_runtime.testing import run_json

DEVICE = "openreg"
TOL = dict(atol=1e-5, rtol=1e-5)
MODES = {"grad": contextlib.nullcontext, "no_grad": torch.no_grad, "inference_mode": torch.inference_mode}


def _storageless(device: str) -> torch.Tensor:
    return torch.Tensor._make_wrapper_subclass(_torch_patches._Storageless, (0,), device=torch.device(device))


def torch_own_answer(device: str) -> bool:
    """torch's own composite kernel, below any kernel openreg registers."""
    op = torch.ops.aten._has_compatible_shallow_copy_type.default
    return op.decompose(_storageless("cpu"), _storageless(device))


def test_the_patch_steps_aside_where_torch_pairs_privateuse1_itself():
    # The probe can say yes (for a dense backend torch counts) and no (for one it does not).
    assert torch_own_answer("cuda") and _torch_patches.torch_shallow_copies("cuda")
    assert not torch_own_answer("meta") and not _torch_patches.torch_shallow_copies("meta")
    registered = isinstance(_torch_patches._shallow_copy, torch.library.Library)
    assert registered == (not torch_own_answer("privateuseone"))
    assert _torch_patches.torch_shallow_copies("privateuseone")  # torch's answer or openreg's


def test_installed_at_import_torch_without_starting_the_device_and_only_once():
    state = run_json("""
        import json, sys, warnings, torch
        import openreg._torch_patches as p
        from openreg import _loader
        first = p._shallow_copy
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a second registration would warn that it overrides the first
            p.install(_loader.load)
        print(json.dumps({"kind": type(first).__name__, "same": p._shallow_copy is first,
                          "loaded": [m for m in ("openreg_runtime", "openreg_eager") if m in sys.modules]}))
    """)
    assert state == {"kind": "Library" if not torch_own_answer("privateuseone") else "bool", "same": True,
                     "loaded": []}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_cpu_and_openreg_tensors_are_shallow_copy_compatible(mode: str, requires_grad: bool):
    cpu = torch.randn(3, requires_grad=requires_grad)
    dev = cpu.detach().to(DEVICE).requires_grad_(requires_grad)
    with MODES[mode]():
        made_here = torch.randn(3), torch.randn(3, device=DEVICE)  # inference tensors in inference mode
        for a, b in [(cpu, dev), (dev, cpu), (dev, dev), (cpu, cpu), made_here, made_here[::-1]]:
            assert torch._has_compatible_shallow_copy_type(a, b), (a.device, b.device)
        # What torch says no to stays no.
        assert not torch._has_compatible_shallow_copy_type(cpu.detach().to_sparse(), dev)
        assert not torch._has_compatible_shallow_copy_type(dev, torch.empty(3, device="meta"))


@pytest.mark.parametrize("below_autograd", [False, True])
def test_fake_tensors_get_the_same_answer_as_cudas(below_autograd: bool):
    # torch.compile asks it of fake tensors, as meta ones (fake_impls' shallow_copy_data_, below autograd).
    from torch._subclasses.fake_tensor import FakeTensorMode, in_kernel_invocation_manager

    mode = FakeTensorMode()
    cpu, dev = mode.from_tensor(torch.randn(3)), mode.from_tensor(torch.randn(3, device=DEVICE))
    meta = torch.empty(3, device="meta")
    below = torch._C._AutoDispatchBelowAutograd if below_autograd else contextlib.nullcontext
    with mode, in_kernel_invocation_manager(mode), below():
        assert torch._has_compatible_shallow_copy_type(cpu, dev)
        assert torch._has_compatible_shallow_copy_type(dev, cpu)
        assert torch._has_compatible_shallow_copy_type(meta, meta)
        assert not torch._has_compatible_shallow_copy_type(dev, meta)  # torch's answer, as for real tensors


def test_data_assignment_moves_a_parameter_between_devices():
    param = nn.Parameter(torch.randn(4, 3))
    expected = param.detach().clone()
    param.data = param.data.to(DEVICE)
    assert type(param) is nn.Parameter and param.device.type == DEVICE and param.requires_grad
    torch.testing.assert_close(param.detach().cpu(), expected)
    param.data = param.data.cpu()
    assert param.device.type == "cpu"
    torch.testing.assert_close(param.detach(), expected)


def test_to_and_back_keeps_parameter_and_grad_objects():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    model(torch.randn(5, 4)).sum().backward()
    params = list(model.parameters())
    grads = [p.grad for p in params]
    expected = [(p.detach().clone(), p.grad.clone()) for p in params]

    def assert_same_objects(device: str, dtype: torch.dtype):
        assert all(p is q for p, q in zip(model.parameters(), params, strict=True))
        assert all(p.grad is g for p, g in zip(params, grads, strict=True))
        for p, (value, grad) in zip(params, expected, strict=True):
            assert (p.device.type, p.dtype, p.grad.device.type, p.grad.dtype) == (device, dtype, device, dtype)
            torch.testing.assert_close(p.detach().cpu(), value.to(dtype))
            torch.testing.assert_close(p.grad.cpu(), grad.to(dtype))

    assert_same_objects("cpu", torch.float32)
    model.to(DEVICE)
    assert_same_objects(DEVICE, torch.float32)
    model.to(torch.float64)
    assert_same_objects(DEVICE, torch.float64)
    model.cpu()
    assert_same_objects("cpu", torch.float64)
    model.to(DEVICE, torch.float32)
    model.to("cpu")
    assert_same_objects("cpu", torch.float32)


class TiedLM(nn.Module):
    """GPT-2's tie: the output projection is the token embedding."""

    def __init__(self, vocab: int = 32, dim: int = 16):
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.mlp(self.wte(tokens)))


@pytest.mark.parametrize("optimizer", [torch.optim.SGD, torch.optim.Adam])
def test_tied_model_stays_tied_and_trains_like_the_cpu_with_an_optimizer_built_before_the_move(optimizer):
    torch.manual_seed(0)
    cpu_model = TiedLM()
    model = copy.deepcopy(cpu_model)  # deepcopy keeps the tie
    cpu_opt, opt = optimizer(cpu_model.parameters(), lr=0.05), optimizer(model.parameters(), lr=0.05)
    before = list(model.parameters())
    model.to(DEVICE)
    assert model.lm_head.weight is model.wte.weight
    assert all(p is q for p, q in zip(model.parameters(), before, strict=True))  # the optimizer's references
    assert all(p.device.type == DEVICE for group in opt.param_groups for p in group["params"])

    generator = torch.Generator().manual_seed(1)
    for _ in range(4):
        tokens, targets = torch.randint(0, 32, (2, 2, 6), generator=generator)
        losses = []
        for m, o, device in [(cpu_model, cpu_opt, "cpu"), (model, opt, DEVICE)]:
            o.zero_grad()
            logits = m(tokens.to(device))
            loss = F.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten())
            loss.backward()
            o.step()
            losses.append(loss.detach().cpu())
        torch.testing.assert_close(losses[1], losses[0], **TOL)

    assert model.lm_head.weight is model.wte.weight
    for (name, p), e in zip(model.named_parameters(), cpu_model.parameters(), strict=True):
        assert p.device.type == DEVICE, name
        torch.testing.assert_close(p.detach().cpu(), e.detach(), **TOL, msg=name)
    model.cpu()
    assert model.lm_head.weight is model.wte.weight and model.wte.weight is before[0]


def test_overwrite_module_params_on_conversion_still_gives_new_parameters():
    model = nn.Linear(3, 2)
    weight = model.weight
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        model.to(torch.float64)  # the CPU's behaviour under this flag
        assert model.weight is not weight
        weight = model.weight
        model.to(DEVICE)
        assert model.weight is not weight and model.weight.device.type == DEVICE
        assert type(model.weight) is nn.Parameter and model.weight.requires_grad
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(model.weight.detach().cpu(), weight.detach())
