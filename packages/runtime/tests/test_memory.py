"""The caching allocator: block sizes and pages, statistics, out of memory,
record_stream, pinned host memory."""

import gc
import re
import time

import pytest
import torch
from torch.testing import assert_close

PAGE = 4096
MiB = 2**20


def stats(device=0):
    o = torch.openreg
    return {
        "allocated": o.memory_allocated(device),
        "reserved": o.memory_reserved(device),
        "max_allocated": o.max_memory_allocated(device),
        "max_reserved": o.max_memory_reserved(device),
        "count": o.memory_stats(device)["allocation.all.current"],
    }


@pytest.mark.parametrize(
    "numel, dtype, block, mapped",
    [
        (1, torch.float32, 512, PAGE),
        (256, torch.float32, 1024, PAGE),
        (1024, torch.float32, PAGE, PAGE),  # exactly one page
        (1025, torch.float32, PAGE + 512, 2 * PAGE),
        (MiB, torch.uint8, MiB, MiB),
        (MiB // 8, torch.float64, MiB, MiB),
        (3 * MiB + 1, torch.uint8, 3 * MiB + 512, 3 * MiB + PAGE),
    ],
)
def test_blocks_are_rounded_as_cudas_and_mapped_in_whole_pages(clean_device, numel, dtype, block, mapped):
    """The statistics count blocks as CUDA's allocator rounds them (to 512 bytes); each is mapped in whole pages,
    which strict mode protects, and those count as reserved."""
    before = stats()
    t = torch.empty(numel, dtype=dtype, device="openreg")
    after = stats()
    assert after["allocated"] - before["allocated"] == block
    assert after["reserved"] - before["reserved"] == mapped  # the cache was empty
    assert after["count"] - before["count"] == 1
    assert torch.openreg.memory_stats()["allocated_bytes.all.current"] == after["allocated"]
    assert torch.openreg.memory_stats()["active_bytes.all.current"] == after["allocated"]
    del t
    assert stats()["allocated"] == before["allocated"]
    assert stats()["count"] == before["count"]


def test_empty_tensor_allocates_nothing(clean_device):
    before = stats()
    t = torch.empty(0, device="openreg")
    assert stats()["allocated"] == before["allocated"]
    assert t.numel() == 0


def test_cache_reuse_and_empty_cache(clean_device):
    base = stats()
    t = torch.empty(MiB, dtype=torch.uint8, device="openreg")
    ptr = t.data_ptr()
    del t
    s = stats()
    assert s["allocated"] == base["allocated"]
    assert s["reserved"] == base["reserved"] + MiB  # kept in the cache
    free, total = torch.openreg.mem_get_info()
    assert total == torch.openreg.get_device_properties(0).total_memory
    assert free == total - s["reserved"]
    u = torch.empty(MiB, dtype=torch.uint8, device="openreg")
    assert u.data_ptr() == ptr  # served from the cache
    assert stats()["reserved"] == base["reserved"] + MiB
    del u
    torch.openreg.empty_cache()
    assert stats()["reserved"] == base["reserved"]
    assert torch.openreg.mem_get_info()[0] == total - base["reserved"]


def test_peak_statistics_and_reset(clean_device):
    torch.openreg.reset_peak_memory_stats()
    base = stats()
    assert base["max_allocated"] == base["allocated"]
    assert base["max_reserved"] == base["reserved"]
    a = torch.empty(2 * MiB, dtype=torch.uint8, device="openreg")
    b = torch.empty(MiB, dtype=torch.uint8, device="openreg")
    del a, b
    s = stats()
    assert s["allocated"] == base["allocated"]
    assert s["max_allocated"] == base["allocated"] + 3 * MiB
    assert s["max_reserved"] == base["reserved"] + 3 * MiB
    ms = torch.openreg.memory_stats()
    assert ms["allocated_bytes.all.peak"] == s["max_allocated"]
    assert ms["reserved_bytes.all.peak"] == s["max_reserved"]
    torch.openreg.reset_peak_memory_stats()
    s = stats()
    assert s["max_allocated"] == s["allocated"]
    assert s["max_reserved"] == s["reserved"]


@pytest.mark.parametrize("deprecated", ["reset_max_memory_allocated", "reset_max_memory_cached"])
def test_deprecated_peak_resets_warn_and_reset_every_peak_as_cudas(clean_device, deprecated):
    a = torch.empty(2 * MiB, dtype=torch.uint8, device="openreg")
    del a
    assert stats()["max_allocated"] > stats()["allocated"]
    with pytest.warns(FutureWarning, match=f"torch.openreg.{deprecated} now calls "
                      "torch.openreg.reset_peak_memory_stats, which resets /all/ peak memory stats") as caught:
        getattr(torch.openreg, deprecated)()
    assert caught[0].filename == __file__
    s = stats()
    assert (s["max_allocated"], s["max_reserved"]) == (s["allocated"], s["reserved"])


def test_nested_memory_stats_are_the_flat_ones_unflattened(clean_device, two_devices):
    keep = torch.empty(MiB, dtype=torch.uint8, device="openreg:1")
    nested = torch.openreg.memory_stats_as_nested_dict("openreg:1")
    assert nested["allocated_bytes"]["all"]["current"] == torch.openreg.memory_allocated(1) >= MiB

    def leaves(prefix, value):
        if not isinstance(value, dict):
            return [(prefix, value)]
        return [leaf for key, sub in value.items() for leaf in leaves(f"{prefix}.{key}" if prefix else key, sub)]

    assert dict(leaves("", nested)) == dict(torch.openreg.memory_stats(1))
    del keep


def test_memory_stats_counts(clean_device):
    before = torch.openreg.memory_stats()
    tensors = [torch.empty(100, device="openreg") for _ in range(5)]
    after = torch.openreg.memory_stats()
    assert after["allocation.all.current"] - before["allocation.all.current"] == 5
    assert after["allocation.all.allocated"] - before["allocation.all.allocated"] == 5
    assert after["allocated_bytes.all.current"] - before["allocated_bytes.all.current"] == 5 * 512
    assert after["requested_bytes.all.current"] - before["requested_bytes.all.current"] == 5 * 400
    assert after["segment.all.current"] - before["segment.all.current"] == 5
    del tensors
    end = torch.openreg.memory_stats()
    assert end["allocation.all.current"] == before["allocation.all.current"]
    assert end["allocation.all.freed"] - before["allocation.all.freed"] == 5


def test_statistics_are_per_device(clean_device, two_devices):
    torch.openreg.empty_cache()
    before0, before1 = stats(0), stats(1)
    t = torch.empty(MiB, dtype=torch.uint8, device="openreg:1")
    assert stats(0)["allocated"] == before0["allocated"]
    assert stats(1)["allocated"] == before1["allocated"] + MiB
    assert torch.openreg.memory_allocated("openreg:1") == before1["allocated"] + MiB
    del t


def test_accelerator_memory_api_agrees(clean_device, two_devices):
    t = torch.empty(MiB + 1, dtype=torch.uint8, device="openreg:1")
    u = torch.empty(10, device="openreg:0")
    for d in (0, 1):
        assert torch.accelerator.memory_allocated(d) == torch.openreg.memory_allocated(d)
        assert torch.accelerator.memory_reserved(d) == torch.openreg.memory_reserved(d)
        assert torch.accelerator.max_memory_allocated(d) == torch.openreg.max_memory_allocated(d)
        assert torch.accelerator.max_memory_reserved(d) == torch.openreg.max_memory_reserved(d)
        acc, own = torch.accelerator.memory_stats(d), torch.openreg.memory_stats(d)
        for key in (
            "allocated_bytes.all.current",
            "allocation.all.current",
            "reserved_bytes.all.current",
            "allocated_bytes.all.peak",
            "segment.all.current",
        ):
            assert acc[key] == own[key], key
    assert torch.accelerator.memory_allocated(1) == MiB + 512
    del t
    torch.accelerator.reset_peak_memory_stats(1)
    assert torch.openreg.max_memory_allocated(1) == torch.openreg.memory_allocated(1)
    del u


def test_alloc_free_loop_returns_to_baseline(clean_device):
    clean = stats()
    sizes = [1, 1000, 5000, 70000]
    for n in sizes:  # warm the cache with one block of each size
        torch.empty(n, device="openreg")
    base = stats()
    for i in range(10_000):
        t = torch.empty(sizes[i % len(sizes)], device="openreg")
        del t
    end = stats()
    assert end["allocated"] == base["allocated"]
    assert end["reserved"] == base["reserved"]
    assert end["count"] == base["count"]
    torch.openreg.empty_cache()
    assert stats()["reserved"] == clean["reserved"]


def test_out_of_memory(run_python, describe_proc):
    proc = run_python(
        """
        import torch, openreg_runtime
        try:
            torch.empty(100 * 2**20, dtype=torch.uint8, device='openreg')
        except torch.openreg.OutOfMemoryError as e:  # torch.OutOfMemoryError, as torch.cuda's
            print('OOM1', str(e).replace('\\n', ' '))
        else:
            raise SystemExit('no OOM for 100 MiB on a 64 MiB device')
        a = torch.ones(48 * 2**20, dtype=torch.uint8, device='openreg')
        try:
            b = torch.empty(32 * 2**20, dtype=torch.uint8, device='openreg')
        except torch.OutOfMemoryError as e:
            print('OOM2', str(e).replace('\\n', ' '))
        else:
            raise SystemExit('no OOM for 32 MiB with 48 MiB in use')
        assert torch.openreg.memory_allocated() == 48 * 2**20, torch.openreg.memory_allocated()
        assert int(a[-1].item()) == 1
        del a
        b = torch.full((32 * 2**20,), 7, dtype=torch.uint8, device='openreg')
        c = torch.full((16 * 2**20,), 9, dtype=torch.uint8, device='openreg')
        print('AFTER', int(b[0].item()), int(c[-1].item()), torch.openreg.memory_allocated())
        """,
        env={"OPENREG_DEVICE_MEMORY": "64MiB"},
    )
    assert proc.returncode == 0, describe_proc(proc)
    lines = {line.split(" ", 1)[0]: line for line in proc.stdout.splitlines()}

    def size(mib):
        return rf"({mib}(\.0+)?\s*MiB|{mib * MiB}\b)"

    oom1, oom2 = lines["OOM1"], lines["OOM2"]
    assert re.search(size(100), oom1), oom1
    assert re.search(size(64), oom1), oom1
    assert re.search(size(32), oom2), oom2  # requested
    assert re.search(size(48), oom2), oom2  # allocated
    assert re.search(size(64), oom2), oom2  # capacity
    assert "OPENREG_DEVICE_MEMORY" in oom2
    assert lines["AFTER"].split() == ["AFTER", "7", "9", str(48 * MiB)]


def test_record_stream_delays_reuse(clean_device):
    nbytes = 3 * PAGE
    side = torch.openreg.Stream()
    assert side.stream_id != 0

    # Control: without record_stream, a freed block is reused at once.
    x = torch.empty(nbytes, dtype=torch.uint8, device="openreg")
    ptr = x.data_ptr()
    del x
    y = torch.empty(nbytes, dtype=torch.uint8, device="openreg")
    assert y.data_ptr() == ptr
    del y

    x = torch.empty(nbytes, dtype=torch.uint8, device="openreg")
    ptr = x.data_ptr()
    with torch.openreg.stream(side):
        torch.openreg._sleep(400_000_000)
    x.record_stream(side)
    del x
    y = torch.empty(nbytes, dtype=torch.uint8, device="openreg")
    assert y.data_ptr() != ptr, "memory still in use by a busy stream was handed out again"
    assert not side.query()
    side.synchronize()
    z = torch.empty(nbytes, dtype=torch.uint8, device="openreg")
    assert z.data_ptr() == ptr, "after the recorded stream finished, the block should be reusable"
    del y, z


def test_record_stream_of_another_device_delays_reuse(clean_device, two_devices):
    """As CUDA's allocator: a tensor may record a stream of another device (a peer copy's), and its block is not
    reused until that stream's work queued so far has run; openreg refused such a stream."""
    nbytes = 3 * PAGE
    x = torch.empty(nbytes, dtype=torch.uint8, device=two_devices[1])
    ptr = x.data_ptr()
    other = torch.openreg.Stream(device=two_devices[0])
    with torch.openreg.stream(other):
        torch.openreg._sleep(300_000_000)
    x.record_stream(other)
    del x
    y = torch.empty(nbytes, dtype=torch.uint8, device=two_devices[1])
    assert y.data_ptr() != ptr and not other.query()
    other.synchronize()
    z = torch.empty(nbytes, dtype=torch.uint8, device=two_devices[1])
    assert z.data_ptr() == ptr
    del y, z


def test_record_stream_keeps_data_for_the_other_stream(clean_device):
    side = torch.openreg.Stream()
    host = torch.empty(PAGE, dtype=torch.uint8)
    x = torch.full((PAGE,), 5, dtype=torch.uint8, device="openreg")
    torch.openreg.synchronize()
    with torch.openreg.stream(side):
        torch.openreg._sleep(300_000_000)
        x.record_stream(side)
        out = torch.empty(PAGE, dtype=torch.uint8, device="openreg")
        out.copy_(x)  # queued on the busy side stream
    del x
    y = torch.full((PAGE,), 9, dtype=torch.uint8, device="openreg")  # must not overwrite x's block
    with torch.openreg.stream(side):
        host.copy_(out)
    assert_close(host, torch.full((PAGE,), 5, dtype=torch.uint8))
    del y


# --- pinned host memory ------------------------------------------------------------


def test_pinned_memory():
    assert torch.ones(4).pin_memory().is_pinned()
    assert not torch.ones(4).is_pinned()
    p = torch.arange(10.0).pin_memory()
    assert_close(p, torch.arange(10.0))
    assert torch.empty(3, pin_memory=True).is_pinned()


@pytest.mark.parametrize("pinned", [True, False])
def test_non_blocking_copies(pinned, two_devices):
    src = torch.randn(1 << 18)
    host = src.clone().pin_memory() if pinned else src.clone()
    dev = host.to("openreg:1", non_blocking=True)
    back = torch.empty_like(src)
    back = back.pin_memory() if pinned else back
    back.copy_(dev, non_blocking=True)
    torch.openreg.synchronize(1)
    assert_close(back, src)
    assert_close(dev.cpu(), src)


def test_non_blocking_copy_from_pinned_memory_is_asynchronous():
    src = torch.arange(1 << 16, dtype=torch.float32).pin_memory()
    dst = torch.empty(1 << 16, device="openreg")
    torch.openreg._sleep(300_000_000)
    start = time.perf_counter()
    dst.copy_(src, non_blocking=True)
    queued = time.perf_counter() - start
    torch.openreg.synchronize()
    assert queued < 0.2, f"a non_blocking copy from pinned memory waited {queued:.3f}s"
    assert_close(dst.cpu(), src)


def test_non_blocking_copy_from_pageable_memory_is_safe():
    # Pageable memory may be reused as soon as the call returns, as on CUDA.
    src = torch.arange(1 << 16, dtype=torch.float32)
    expect = src.clone()
    torch.openreg._sleep(100_000_000)
    dst = src.to("openreg", non_blocking=True)
    src.zero_()
    assert_close(dst.cpu(), expect)


def test_gc_of_device_tensors_frees_memory(clean_device):
    base = torch.openreg.memory_allocated()

    class Holder:
        pass

    h = Holder()
    h.self = h
    h.t = torch.empty(MiB, dtype=torch.uint8, device="openreg")
    del h
    gc.collect()
    assert torch.openreg.memory_allocated() == base


def test_pinned_source_kept_alive_until_async_copy_runs():
    n = 1 << 16
    src = torch.arange(n, dtype=torch.float32).pin_memory()
    expect = src.clone()
    dst = torch.empty(n, device="openreg")
    torch.openreg._sleep(200_000_000)
    dst.copy_(src, non_blocking=True)
    del src
    gc.collect()
    others = [torch.full((n,), -7.0).pin_memory() for _ in range(4)]  # would reuse freed memory
    torch.openreg.synchronize()
    assert_close(dst.cpu(), expect)
    del others


def test_device_source_freed_before_async_copy_to_pinned_runs():
    n = 1 << 16
    d = torch.full((n,), 5.0, device="openreg")
    host = torch.empty(n).pin_memory()
    torch.openreg._sleep(200_000_000)
    host.copy_(d, non_blocking=True)
    del d
    again = torch.full((n,), 9.0, device="openreg")  # may take d's block; its fill is queued after the copy
    torch.openreg.synchronize()
    assert_close(host, torch.full((n,), 5.0))
    assert_close(again.cpu(), torch.full((n,), 9.0))


def test_empty_cache_of_one_device(clean_device, two_devices):
    base0, base1 = torch.openreg.memory_reserved(0), torch.openreg.memory_reserved(1)
    a = torch.empty(MiB, dtype=torch.uint8, device="openreg:0")
    b = torch.empty(MiB, dtype=torch.uint8, device="openreg:1")
    keep = torch.empty(2 * MiB, dtype=torch.uint8, device="openreg:1")
    del a, b
    torch.openreg.empty_cache("openreg:1")
    assert torch.openreg.memory_reserved(1) == base1 + 2 * MiB  # the live tensor's memory stays
    assert torch.openreg.memory_reserved(0) == base0 + MiB  # other device untouched
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved(0) == base0
    del keep
    torch.openreg.empty_cache()
    assert torch.openreg.memory_reserved(1) == base1


def _stats_from_the_snapshot(device):
    """The statistics PyTorch's test_cuda.py (_check_memory_stat_consistency) derives from memory_snapshot()."""
    expected = dict.fromkeys(["segment", "reserved_bytes", "allocated_bytes", "active_bytes", "allocation", "active",
                              "inactive_split", "inactive_split_bytes"], 0)
    for segment in torch.openreg.memory_snapshot():
        if segment["device"] != device:
            continue
        expected["segment"] += 1
        for key, size in (("reserved_bytes", "total_size"), ("allocated_bytes", "allocated_size"),
                          ("active_bytes", "active_size")):
            expected[key] += segment[size]
        split = len(segment["blocks"]) > 1
        for block in segment["blocks"]:
            expected["allocation"] += block["state"] == "active_allocated"
            expected["active"] += block["state"].startswith("active_")
            if block["state"] == "inactive" and split:
                expected["inactive_split"] += 1
                expected["inactive_split_bytes"] += block["size"]
    return expected


def test_statistics_agree_with_the_snapshot(clean_device):
    """As CUDA's: memory_stats() counts what memory_snapshot() shows, the inactive blocks of split segments (a block
    and the rest of its last page) too, through allocations, frees into the cache, reuse and empty_cache()."""
    def check():
        expected, stats = _stats_from_the_snapshot(0), torch.openreg.memory_stats()
        assert {key: stats[f"{key}.all.current"] for key in expected} == expected

    kept = [torch.empty(n, dtype=torch.uint8, device="openreg") for n in (1, 512, PAGE, 3 * PAGE + 1, MiB + 7)]
    check()
    freed = [torch.empty(n, dtype=torch.uint8, device="openreg") for n in (100, 2 * PAGE, MiB + 7)]
    del freed
    check()
    reused = torch.empty(100, dtype=torch.uint8, device="openreg")
    check()
    torch.openreg.empty_cache()
    check()
    del kept, reused
    torch.openreg.empty_cache()
    check()
    assert torch.openreg.memory_stats()["inactive_split.all.current"] == 0


def test_empty_cache_counts_as_a_synchronization_of_every_stream(clean_device):
    """memory_stats()["num_sync_all_streams"] counts empty_cache() as CUDA's does (PyTorch's
    test_cuda_multigpu.py::test_memory_stats): it waits for every stream of the device."""
    counts = []
    for _ in range(3):
        counts.append(torch.openreg.memory_stats()["num_sync_all_streams"])
        torch.openreg.empty_cache()
    assert counts[1] == counts[0] + 1 and counts[2] == counts[1] + 1


def test_memory_functions_take_a_device_context_object(clean_device, two_devices):
    """torch.cuda's memory functions take a `torch.cuda.device(i)` object for device i; torch.openreg's take
    theirs. A CPU device is refused with CUDA's words."""
    keep = torch.empty(MiB, dtype=torch.uint8, device="openreg:1")
    with torch.openreg.device(1) as context:
        assert torch.openreg.memory_allocated(context) == torch.openreg.memory_allocated(1) >= MiB
        assert torch.openreg.memory_stats(context) == torch.openreg.memory_stats(1)
    assert torch.openreg.memory_reserved(torch.openreg.device(0)) == torch.openreg.memory_reserved(0)
    with pytest.raises(ValueError, match="^Expected an openreg device, but got: cpu$"):
        torch.openreg.memory_allocated("cpu")
    del keep


def test_empty_cache_waits_for_record_stream_users(clean_device):
    base = torch.openreg.memory_reserved()
    side = torch.openreg.Stream()
    x = torch.empty(MiB, dtype=torch.uint8, device="openreg")
    with torch.openreg.stream(side):
        torch.openreg._sleep(200_000_000)
    x.record_stream(side)
    del x
    torch.openreg.empty_cache()
    assert side.query()
    assert torch.openreg.memory_reserved() == base
