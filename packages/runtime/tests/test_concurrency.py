"""Many host threads using the device at once, each on its own stream."""

import threading
import time

import torch
from torch.testing import assert_close

THREADS = 8
ITERATIONS = 300


def _run_threads(target):
    errors = []

    def wrapped(tid):
        try:
            target(tid)
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append((tid, repr(e)))

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    assert errors == []


def test_threads_with_own_streams_copy_without_corruption(two_devices):
    def work(tid):
        device = tid % 2
        stream = torch.openreg.Stream(device)
        with torch.openreg.stream(stream):
            assert torch.openreg.current_stream(device).stream_id == stream.stream_id
            for i in range(ITERATIONS):
                src = torch.full((257 + tid,), float(tid * 100_000 + i))
                d = src.to(f"openreg:{device}")
                back = d.cpu()
                assert_close(back, src, msg=f"thread {tid} iteration {i}")
        torch.openreg.synchronize(device)

    _run_threads(work)


def test_threads_mixing_async_copies_and_device_to_device(two_devices):
    def work(tid):
        stream0 = torch.openreg.Stream(0)
        with torch.openreg.stream(stream0):
            for i in range(ITERATIONS // 3):
                src = torch.arange(1000, dtype=torch.float64) + tid * 1_000_000 + i
                pinned = src.pin_memory()
                d0 = pinned.to("openreg:0", non_blocking=True)
                d1 = d0.to("openreg:1")  # cross-device copy
                d0.fill_(-1.0)  # must not affect d1
                host = torch.empty_like(src).pin_memory()
                host.copy_(d1, non_blocking=True)
                torch.openreg.synchronize(1)
                assert_close(host, src, msg=f"thread {tid} iteration {i}")
                assert_close(d0.cpu(), torch.full((1000,), -1.0, dtype=torch.float64))

    _run_threads(work)


def test_allocation_statistics_consistent_after_threads(clean_device):
    base = torch.openreg.memory_allocated(0)
    base_count = torch.openreg.memory_stats(0)["allocation.all.current"]
    base_allocs = torch.openreg.memory_stats(0)["allocation.all.allocated"]

    def work(tid):
        for i in range(200):
            t = torch.empty(100 * (tid + 1) + i, device="openreg:0")
            del t

    _run_threads(work)
    assert torch.openreg.memory_allocated(0) == base
    stats = torch.openreg.memory_stats(0)
    assert stats["allocation.all.current"] == base_count
    assert stats["allocation.all.allocated"] - base_allocs == THREADS * 200


def test_threads_sharing_one_stream_keep_its_order():
    # Launchers on one stream share its queue: each thread's work runs in the order it was queued, and an
    # event recorded after a thread's work completes only after that work.
    stream = torch.openreg.default_stream(0)
    seen = []

    def work(tid):
        with torch.openreg.stream(stream):
            t = torch.zeros(64, dtype=torch.float64, device="openreg:0")
            for i in range(ITERATIONS):
                t.fill_(float(tid * 1_000_000 + i))
            done = torch.openreg.Event()
            done.record(stream)
            done.synchronize()
            seen.append((tid, t.cpu()))

    _run_threads(work)
    assert sorted(tid for tid, _ in seen) == list(range(THREADS))
    for tid, values in seen:
        assert_close(values, torch.full((64,), float(tid * 1_000_000 + ITERATIONS - 1), dtype=torch.float64))


def test_threads_waiting_for_different_points_of_a_stream_each_wake_when_theirs_is_reached():
    # A sleeping host thread is woken when the task it waits for completes, not before and not only at the end:
    # waiters for an early and a late event on one stream return in that order, each once its work has run.
    stream = torch.openreg.Stream()
    events = []
    with torch.openreg.stream(stream):
        for _ in range(3):
            torch.openreg._sleep(150_000_000)
            events.append(stream.record_event())
    returned = {}
    start = time.perf_counter()

    def wait(i):
        events[i].synchronize()
        returned[i] = (time.perf_counter() - start, events[i].query(), [e.query() for e in events])

    threads = [threading.Thread(target=wait, args=(i,)) for i in (2, 0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a waiting thread hung"
    for i in range(3):
        elapsed, done, all_done = returned[i]
        assert done and elapsed >= 0.15 * (i + 1) - 0.01, (i, elapsed)
        if i < 2:  # woken at its own event, while later work is still queued
            assert not all_done[2], (i, elapsed)
