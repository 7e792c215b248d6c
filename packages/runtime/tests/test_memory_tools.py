"""torch.cuda's memory tools on openreg: memory_summary, the per-process memory fraction, caching_allocator_alloc /
caching_allocator_delete and the deprecated *_cached names."""

from __future__ import annotations

import re

import pytest
import torch


@pytest.fixture
def fraction():
    yield torch.openreg.set_per_process_memory_fraction
    torch.openreg.set_per_process_memory_fraction(1.0)


def test_memory_summary_shows_the_allocators_statistics(clean_device):
    x = torch.empty(1024 * 1024, device="openreg")  # 4 MiB
    summary = torch.openreg.memory_summary()
    allocated = re.search(r"\| Allocated memory\s*\|\s*(\d+) KiB", summary)
    assert allocated and int(allocated.group(1)) == torch.openreg.memory_allocated() // 1024, summary
    assert "GPU reserved segments" in summary and "Oversize allocations" in summary
    del x


def test_an_allocation_past_the_memory_fraction_raises_saying_so(clean_device, fraction):
    assert torch.openreg.get_per_process_memory_fraction() == 1.0
    capacity = torch.openreg.mem_get_info()[1]
    fraction(0.01)
    assert torch.openreg.get_per_process_memory_fraction() == 0.01
    kept = torch.empty(capacity // 400, dtype=torch.uint8, device="openreg")  # within 1%
    with pytest.raises(torch.OutOfMemoryError, match=r"set_per_process_memory_fraction\(0\.010*\)"):
        torch.empty(capacity // 100, dtype=torch.uint8, device="openreg")
    fraction(1.0)
    assert torch.empty(capacity // 100, dtype=torch.uint8, device="openreg").numel() == capacity // 100
    del kept


def test_the_memory_fraction_is_checked_as_cuda_checks_it(fraction):
    with pytest.raises(TypeError, match="must be `float`"):
        fraction(1)
    with pytest.raises(ValueError, match="Allowed range: 0~1"):
        fraction(1.5)


def test_caching_allocator_alloc_and_delete(clean_device):
    before = torch.openreg.memory_allocated()
    ptr = torch.openreg.caching_allocator_alloc(10_000, stream=torch.openreg.Stream())
    assert isinstance(ptr, int) and ptr != 0
    assert torch.openreg.memory_allocated() - before >= 10_000
    torch.openreg.caching_allocator_delete(ptr)
    assert torch.openreg.memory_allocated() == before
    with pytest.raises(RuntimeError, match="invalid device pointer"):
        torch.openreg.caching_allocator_delete(12345)


def test_cached_is_the_old_name_of_reserved(clean_device):
    x = torch.ones(1000, device="openreg")
    assert torch.openreg.memory_cached() == torch.openreg.memory_reserved() > 0
    assert torch.openreg.max_memory_cached() == torch.openreg.max_memory_reserved()
    del x
