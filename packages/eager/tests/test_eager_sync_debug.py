"""Sync debug mode on ops: those whose result depends on the data (nonzero, boolean masks, a Python scalar) block
the host on openreg as on CUDA and are reported; ops that queue are not, their first call included (openreg runs
it at the call to raise its checks there, which CUDA does not do), and neither are ops openreg runs on the host
where CUDA queues them."""

from __future__ import annotations

import warnings

import pytest
import torch


def _reported(fn) -> list[str]:
    """The sync reports of fn() in "warn" mode."""
    torch.openreg.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
    finally:
        torch.openreg.set_sync_debug_mode("default")
    return [str(w.message) for w in caught if "synchronizing openreg operation" in str(w.message)]


@pytest.mark.parametrize("op, name", [
    (lambda x: x.nonzero(), "aten::nonzero"),
    (lambda x: x[x > 0], "aten::index"),
    (lambda x: torch.masked_select(x, x > 0), "aten::masked_select"),
    (lambda x: torch.unique(x), "aten::_unique2"),
    (lambda x: torch.equal(x, x), "aten::equal"),
])
def test_data_dependent_ops_are_reported(op, name):
    x = torch.tensor([0.5, -1.0, 2.0, 0.0], device="openreg")
    reports = _reported(lambda: op(x))
    assert any(name in r for r in reports), reports


def test_queued_ops_are_not_reported_even_on_their_first_call():
    x = torch.randn(7, 3, device="openreg")
    # Shapes seen nowhere else in the tests: these are first calls, run at the call.
    assert _reported(lambda: (x.sin() * 3).sum(dim=1).softmax(dim=0).cumsum(0)) == []


def test_ops_openreg_runs_on_the_host_where_cuda_queues_them_are_not_reported():
    bn = torch.nn.BatchNorm2d(3).to("openreg").eval()
    bag = torch.nn.EmbeddingBag(10, 3).to("openreg")
    attention = torch.nn.MultiheadAttention(4, 2, batch_first=True).to("openreg").eval()
    x, q = torch.randn(2, 3, 4, 4, device="openreg"), torch.randn(2, 5, 4, device="openreg")
    indices, offsets = torch.tensor([1, 2, 3, 4], device="openreg"), torch.tensor([0, 2], device="openreg")
    with torch.inference_mode():  # the fast path: _native_multi_head_attention
        assert _reported(lambda: (bn(x), bag(indices, offsets), attention(q, q, q, need_weights=False))) == []


@pytest.mark.parametrize("opt", [torch.optim.SGD, torch.optim.Adagrad], ids=["sgd", "adagrad"])
def test_fused_steps_torch_has_no_meta_kernel_for_queue(opt):
    """The fused SGD and Adagrad steps (torch has a meta kernel for Adam's alone) queue as CUDA's do; they waited
    for the device at every step."""
    w = torch.randn(5, 5, device="openreg", requires_grad=True)
    w.grad = torch.randn_like(w)
    optimizer = opt([w], lr=0.1, fused=True)
    assert _reported(lambda: [optimizer.step() for _ in range(3)]) == []
