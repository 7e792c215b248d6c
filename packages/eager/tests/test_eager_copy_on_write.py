"""Lazy clones (`torch._lazy_clone`: copy-on-write storage, which PyTorch's TestCompositeCompliance.test_cow_input
checks every op against): a write gives the written tensor memory of its own first, so the tensor it shares memory
with keeps its values, and a read leaves the sharing alone, as on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import openreg_eager  # noqa: F401  (registers the openreg kernels)

is_cow = torch._C._is_cow_tensor


def _bn_training(t):
    F.batch_norm(torch.arange(12.0, device=t.device).reshape(4, 3), t, torch.ones(3, device=t.device), training=True)


def _index_put(t):
    t[torch.tensor([0, 2], device=t.device)] = 7.0


# name -> a write into the lazy clone `t` (3 float32 elements, zeros)
WRITES = {
    "add_": lambda t: t.add_(1),
    "fill_": lambda t: t.fill_(2),
    "zero_ of a view": lambda t: t[1:].zero_(),
    "copy_ from the host": lambda t: t.copy_(torch.tensor([1.0, 2.0, 3.0])),
    "copy_ on the device": lambda t: t.copy_(torch.ones(3, device=t.device)),
    "out=": lambda t: torch.add(torch.ones(3, device=t.device), 1, out=t),
    "setitem": lambda t: t.__setitem__(0, 5.0),
    "index_put_": _index_put,
    "uniform_": lambda t: t.uniform_(),
    "normal_": lambda t: t.normal_(),
    "bernoulli_": lambda t: t.bernoulli_(0.5),
    "batch_norm running_mean": _bn_training,
}
RANDOM = {"uniform_", "normal_", "bernoulli_"}


@pytest.mark.parametrize("name", list(WRITES))
@pytest.mark.parametrize("written", ["clone", "source"])
def test_a_write_leaves_the_tensor_sharing_its_memory_alone(name, written):
    results = {}
    for device in ("cpu", "openreg"):
        source = torch.zeros(3, device=device)
        clone = torch._lazy_clone(source)
        target, other = (clone, source) if written == "clone" else (source, clone)
        WRITES[name](target)
        assert not is_cow(target), f"{device}: the written tensor still shares its memory"
        assert is_cow(other) and torch.equal(other.cpu(), torch.zeros(3)), f"{device}: the write reached the other"
        results[device] = target.cpu()
    if name not in RANDOM:
        torch.testing.assert_close(results["openreg"], results["cpu"])


def test_reads_keep_the_memory_shared():
    source = torch.arange(4.0, device="openreg")
    clone = torch._lazy_clone(source)
    torch.testing.assert_close((clone * 2 + source.sum()).cpu(), torch.arange(4.0) * 2 + 6)
    assert is_cow(clone) and is_cow(source)


def test_a_written_clone_can_be_cloned_and_written_again():
    # Materializing retires the storage's copy-on-write hook, which a second lazy clone installs anew.
    first = torch.zeros(3, device="openreg")
    second = torch._lazy_clone(first)
    second.add_(1)
    third = torch._lazy_clone(second)
    third.add_(1)
    expected = [torch.full((3,), value) for value in (0.0, 1.0, 2.0)]
    torch.testing.assert_close([t.cpu() for t in (first, second, third)], expected)
