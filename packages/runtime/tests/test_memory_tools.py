"""torch.cuda's memory tools on openreg: memory_summary, the per-process memory fraction, caching_allocator_alloc /
caching_allocator_delete, the deprecated *_cached names, and the memory history and snapshots in torch.cuda's
formats, read by torch's own viewer code (torch.cuda._memory_viz)."""

from __future__ import annotations

import pickle
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


def test_host_memory_stats_count_pinned_memory():
    torch.openreg.reset_peak_host_memory_stats()
    before = torch.openreg.host_memory_stats()
    pinned = torch.empty(1 << 20, dtype=torch.uint8).pin_memory()
    during = torch.openreg.host_memory_stats()
    assert during["allocated_bytes.current"] - before["allocated_bytes.current"] >= 1 << 20
    assert during["active_requests.current"] == before["active_requests.current"] + 1
    assert during["num_host_alloc"] == before["num_host_alloc"] + 1
    del pinned
    after = torch.openreg.host_memory_stats()
    assert after["active_requests.current"] == before["active_requests.current"]
    assert after["allocated_bytes.peak"] >= during["allocated_bytes.current"]
    assert torch.openreg.host_memory_stats_as_nested_dict()["num_host_free"] == after["num_host_free"]
    torch.openreg.reset_accumulated_host_memory_stats()
    assert torch.openreg.host_memory_stats()["num_host_alloc"] == 0


def _allocate_in_a_named_function() -> torch.Tensor:
    return torch.empty(300_000, device="openreg")


@pytest.fixture
def history():
    torch.openreg.memory._record_memory_history(max_entries=100)
    yield
    torch.openreg.memory._record_memory_history(enabled=None)


def test_the_snapshot_names_who_allocated_each_block(clean_device, history):
    x = _allocate_in_a_named_function()
    snapshot = torch.openreg.memory._snapshot()
    (segment,) = [s for s in snapshot["segments"] if s["address"] == x.data_ptr()]
    block, *rest = segment["blocks"]  # the tensor's block, then what is left of its pages
    assert block["state"] == "active_allocated" and block["requested_size"] == x.nbytes
    assert x.nbytes <= block["size"] < x.nbytes + 512 and segment["device"] == 0
    assert segment["total_size"] == sum(b["size"] for b in segment["blocks"]) and segment["total_size"] % 4096 == 0
    assert all(b["state"] == "inactive" for b in rest)
    assert {"name": "_allocate_in_a_named_function", "filename": __file__} == {
        k: block["frames"][0][k] for k in ("name", "filename")}
    assert torch.openreg.memory_snapshot() == snapshot["segments"]


def test_the_trace_records_allocations_and_frees_in_order(clean_device, history):
    x = _allocate_in_a_named_function()
    address = x.data_ptr()
    del x
    trace = torch.openreg.memory._snapshot()["device_traces"][0]
    mine = [e for e in trace if e["addr"] == address and not e["action"].startswith("segment_")]
    assert [e["action"] for e in mine] == ["alloc", "free_requested", "free_completed"]
    assert mine[0]["frames"][0]["name"] == "_allocate_in_a_named_function"
    assert mine[0]["size"] >= 300_000 * 4 and mine[0]["stream"] == 0
    torch.openreg.memory._record_memory_history(enabled=None)
    y = torch.empty(10, device="openreg")
    assert not any(e["addr"] == y.data_ptr() for e in torch.openreg.memory._snapshot()["device_traces"][0])


def _empty_cache_here():
    torch.openreg.empty_cache()


def test_the_trace_records_segments_and_refused_allocations_as_cudas_does(clean_device, history, fraction):
    """As CUDA's allocator: a new segment (cudaMalloc) comes before the block taken from it, giving the cache back
    frees segments (cudaFree), and a refused allocation leaves an "oom" entry with the bytes still free; each with
    the stack of the call that caused it. openreg gives each block a segment of its own."""
    from torch.cuda import _memory_viz

    x = _allocate_in_a_named_function()
    address, size = x.data_ptr(), x.untyped_storage().nbytes()
    del x
    _empty_cache_here()
    fraction(0.001)
    limit = int(0.001 * torch.openreg.mem_get_info()[1])
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(limit + 1, dtype=torch.uint8, device="openreg")
    snapshot = torch.openreg.memory._snapshot()
    trace = snapshot["device_traces"][0]
    def caller(entry):  # the innermost frame of this file
        return next(f["name"] for f in entry["frames"] if f["filename"] == __file__)

    mine = [(e["action"], caller(e)) for e in trace if e.get("addr") == address]
    assert mine == [("segment_alloc", "_allocate_in_a_named_function"), ("alloc", "_allocate_in_a_named_function"),
                    ("free_requested", "test_the_trace_records_segments_and_refused_allocations_as_cudas_does"),
                    ("free_completed", "test_the_trace_records_segments_and_refused_allocations_as_cudas_does"),
                    ("segment_free", "_empty_cache_here")]
    sizes = {e["action"]: e["size"] for e in trace if e.get("addr") == address}
    assert size <= sizes["alloc"] == sizes["free_completed"] < size + 512  # a block, rounded as CUDA rounds it
    assert sizes["alloc"] <= sizes["segment_alloc"] == sizes["segment_free"] < sizes["alloc"] + 4096  # whole pages
    oom = trace[-1]
    assert oom["action"] == "oom" and oom["size"] == limit + 1 and "addr" not in oom
    assert 0 <= oom["device_free"] <= limit
    assert caller(oom) == "test_the_trace_records_segments_and_refused_allocations_as_cudas_does"
    text = _memory_viz.trace(snapshot)
    assert "cudaMalloc(" in text and "cudaFree(" in text and "raise OutOfMemoryError" in text, text


def test_the_history_keeps_the_last_max_entries(clean_device, history):
    torch.openreg.memory._record_memory_history(max_entries=4)
    for _ in range(10):
        torch.empty(10, device="openreg")
    assert len(torch.openreg.memory._snapshot()["device_traces"][0]) == 4


def test_snapshots_load_in_torchs_memory_viewer(clean_device, history, tmp_path):
    from torch.cuda import _memory_viz

    x = _allocate_in_a_named_function()
    torch.openreg.memory._dump_snapshot(str(tmp_path / "snapshot.pickle"))
    snapshot = pickle.loads((tmp_path / "snapshot.pickle").read_bytes())
    assert "total_allocated" in _memory_viz.segsum(snapshot)
    assert "TOTAL MEM" in _memory_viz.trace(snapshot)  # it read the whole trace
    for plot in (_memory_viz.trace_plot, _memory_viz.segment_plot):  # the HTML pages of pytorch.org/memory_viz
        page = plot(snapshot)
        assert "<!DOCTYPE html>" in page and "snapshot.pickle" in page
    del x


def _free_in_a_named_function(tensors: list) -> None:
    tensors.clear()


def _names(entries) -> set:
    return {f["name"] for e in entries for f in e["frames"]}


@pytest.mark.parametrize(("context", "block", "alloc", "free"), [
    ("state", True, False, False), ("alloc", True, True, False), ("all", True, True, True),
    (None, False, False, False)])
def test_context_chooses_the_stacks_kept_as_torch_cudas_does(clean_device, context, block, alloc, free):
    """torch.cuda's contexts: "state" keeps the stacks of live blocks, "alloc" also the trace's allocations, "all"
    also its frees; None, none."""
    torch.openreg.memory._record_memory_history(context=context)
    try:
        kept, freed = [_allocate_in_a_named_function()], [_allocate_in_a_named_function()]
        _free_in_a_named_function(freed)
        snapshot = torch.openreg.memory._snapshot()
    finally:
        torch.openreg.memory._record_memory_history(enabled=None)
    (segment,) = [s for s in snapshot["segments"] if s["address"] == kept[0].data_ptr()]
    assert ("_allocate_in_a_named_function" in _names(segment["blocks"])) == block
    trace = snapshot["device_traces"][0]
    assert ("_allocate_in_a_named_function" in _names(e for e in trace if e["action"] == "alloc")) == alloc
    assert ("_free_in_a_named_function" in _names(e for e in trace if e["action"].startswith("free"))) == free


def test_skip_actions_leaves_them_out_of_the_trace(clean_device):
    torch.openreg.memory._record_memory_history(skip_actions=["alloc", "free_requested"])
    try:
        x = torch.empty(1000, device="openreg")
        del x
        actions = {e["action"] for e in torch.openreg.memory._snapshot()["device_traces"][0]}
    finally:
        torch.openreg.memory._record_memory_history(enabled=None)
    assert "free_completed" in actions and not actions & {"alloc", "free_requested"}


def test_a_recall_keeps_the_trace_and_stopping_or_clear_history_drops_it(clean_device):
    def recorded(x):
        return any(e.get("addr") == x.data_ptr() for e in torch.openreg.memory._snapshot()["device_traces"][0])

    torch.openreg.memory._record_memory_history()
    try:
        x = torch.empty(1000, device="openreg")
        torch.openreg.memory._record_memory_history(context=None)
        torch.openreg.memory._record_memory_history()
        assert recorded(x)
        torch.openreg.memory._record_memory_history(clear_history=True)
        assert not recorded(x)
    finally:
        torch.openreg.memory._record_memory_history(enabled=None)
    assert torch.openreg.memory._snapshot()["device_traces"][0] == []


def test_enabled_state_keeps_the_last_entry(clean_device):
    torch.openreg.memory._record_memory_history("state")
    try:
        for n in (10, 20, 30):
            torch.empty(n, device="openreg")
        trace = torch.openreg.memory._snapshot()["device_traces"][0]
    finally:
        torch.openreg.memory._record_memory_history(enabled=None)
    assert len(trace) == 1


@pytest.mark.parametrize(("context", "shown"), [("alloc", "_allocate_in_a_named_function"),
                                                ("all", "_empty_cache_here")])
def test_a_freed_segment_shows_the_stack_torch_cudas_context_gives_it(clean_device, context, shown):
    """CUDA's: the stack that mapped the segment, unless context="all" records the freeing one."""
    torch.openreg.memory._record_memory_history(context=context)
    try:
        x = _allocate_in_a_named_function()
        address = x.data_ptr()
        del x
        _empty_cache_here()
        trace = torch.openreg.memory._snapshot()["device_traces"][0]
    finally:
        torch.openreg.memory._record_memory_history(enabled=None)
    (freed,) = [e for e in trace if e["action"] == "segment_free" and e["addr"] == address]
    assert next(f["name"] for f in freed["frames"] if f["filename"] == __file__) == shown
