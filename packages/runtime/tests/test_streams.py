"""Streams and events: asynchrony, ordering, timing, asynchronous failures. Every test runs under the stream
sanitizer, which reports nothing where streams are properly ordered."""

import gc
import weakref

import pytest
import torch
from torch.testing import assert_close

import openreg_runtime._C as C


@pytest.fixture(autouse=True)
def stream_sanitizer():
    torch.openreg.set_stream_sanitizer("error")
    yield
    torch.openreg.set_stream_sanitizer("off")


def test_work_is_asynchronous():
    s = torch.openreg.Stream()
    with torch.openreg.stream(s):
        torch.openreg._sleep(300_000_000)
        e = torch.openreg.Event()
        e.record()
    assert e.query() is False
    assert s.query() is False
    assert torch.openreg.default_stream().query() is True  # other streams are not held up
    torch.openreg.synchronize()
    assert e.query() is True
    assert s.query() is True


def test_event_synchronize_and_stream_synchronize():
    s = torch.openreg.Stream()
    with torch.openreg.stream(s):
        torch.openreg._sleep(150_000_000)
        e = s.record_event()
        torch.openreg._sleep(150_000_000)
    e.synchronize()
    assert e.query()
    assert not s.query()
    s.synchronize()
    assert s.query()


def test_elapsed_time():
    """Also _sleep's unit, torch.cuda._sleep's: cycles, 1_000_000 a millisecond on openreg's nominal clock (a
    CUDA test's cycle counts, ported, take the time they take on a GPU)."""
    start = torch.openreg.Event(enable_timing=True)
    end = torch.openreg.Event(enable_timing=True)
    start.record()
    torch.openreg._sleep(100_000_000)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert 90 <= ms < 5000


def test_an_event_names_its_class_and_takes_cudas_arguments():
    """As torch.cuda.Event: its repr names it, and `external` (which CUDA needs to time events recorded in a
    graph capture) is taken."""
    e = torch.openreg.Event(enable_timing=True, external=True)
    assert repr(e) == "<torch.openreg.Event uninitialized>"
    e.record()
    assert repr(e).startswith("<torch.openreg.Event device=openreg:0 event_id=0x")
    e.synchronize()


def test_elapsed_time_needs_timing_events():
    start, end = torch.openreg.Event(), torch.openreg.Event()
    start.record()
    end.record()
    end.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        start.elapsed_time(end)
    # The same through the generic torch.Event.
    g_start, g_end = torch.Event(device="openreg:0"), torch.Event(device="openreg:0")
    g_start.record()
    g_end.record()
    g_end.synchronize()
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        g_start.elapsed_time(g_end)


def test_elapsed_time_between_devices_is_refused(two_devices):
    """As CUDA's (cudaEventElapsedTime fails for events of two devices): each device keeps its own clock, so
    openreg's difference of two devices' times, which could be negative, is refused, whichever API asks."""
    events = []
    for device in two_devices:
        with torch.openreg.device(device):
            events.append(torch.openreg.Event(enable_timing=True))
            events[-1].record()
    generic = [torch.Event(enable_timing=True) for _ in two_devices]
    for event, device in zip(generic, two_devices, strict=True):
        event.record(torch.Stream(device.index))
    torch.openreg.synchronize(0)
    torch.openreg.synchronize(1)
    for start, end in (events, generic, generic[::-1]):
        with pytest.raises(RuntimeError, match="needs both events recorded on one device"):
            start.elapsed_time(end)


def test_an_event_has_no_device_until_it_is_recorded(two_devices):
    """torch.cuda.Event's device is None until it is recorded, then the recording stream's."""
    event = torch.openreg.Event()
    assert event.device is None
    event.record(torch.openreg.Stream(device=two_devices[1]))
    assert event.device == two_devices[1]


def test_a_stream_has_a_native_handle_of_its_own(two_devices):
    """torch.Stream.native_handle (torch.cuda.Stream.cuda_stream's generic form): an opaque handle, the same for the
    same stream however it is named, another for another stream."""
    s, other = torch.openreg.Stream(), torch.openreg.Stream(device=two_devices[1])
    same = torch.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert s.native_handle == same.native_handle != 0
    assert len({s.native_handle, other.native_handle, torch.openreg.default_stream().native_handle}) == 3
    with torch.openreg.stream(s):
        assert torch.accelerator.current_stream().native_handle == s.native_handle


def _slow_fill(stream, x, value, delay_ms=300):
    with torch.openreg.stream(stream):
        torch.openreg._sleep(delay_ms * 1_000_000)
        x.fill_(value)


def test_streams_run_independently_without_waiting():
    # The control for the ordering tests below: without a wait, a copy on
    # stream B overtakes the slow work on stream A. The race the sanitizer reports (test_stream_sanitizer.py).
    torch.openreg.set_stream_sanitizer("off")
    a, b = torch.openreg.Stream(), torch.openreg.Stream()
    x = torch.zeros(1000, device="openreg")
    torch.openreg.synchronize()
    _slow_fill(a, x, 7.0)
    with torch.openreg.stream(b):
        early = x.cpu()
    torch.openreg.synchronize()
    assert_close(early, torch.zeros(1000))
    assert_close(x.cpu(), torch.full((1000,), 7.0))


def test_wait_event_orders_streams():
    a, b = torch.openreg.Stream(), torch.openreg.Stream()
    x = torch.zeros(1000, device="openreg")
    torch.openreg.synchronize()
    _slow_fill(a, x, 7.0)
    ev = torch.openreg.Event()
    ev.record(a)
    b.wait_event(ev)
    with torch.openreg.stream(b):
        y = x.cpu()
    assert_close(y, torch.full((1000,), 7.0))


def test_wait_stream_orders_streams():
    a, b = torch.openreg.Stream(), torch.openreg.Stream()
    x = torch.zeros(1000, device="openreg")
    dst = torch.zeros(1000, device="openreg")
    torch.openreg.synchronize()
    _slow_fill(a, x, 3.0)
    b.wait_stream(a)
    with torch.openreg.stream(b):
        dst.copy_(x)  # device-to-device copy on B
        out = dst.cpu()
    assert_close(out, torch.full((1000,), 3.0))


def test_record_event_takes_and_returns_openreg_events(two_devices):
    # As torch.cuda.Stream.record_event does with torch.cuda.Event; torch.Stream's own refuses subclasses.
    s = torch.openreg.Stream(device=1)
    made = s.record_event()
    assert type(made) is torch.openreg.Event and made.device == torch.device("openreg:1")
    given = torch.openreg.Event(enable_timing=True)
    assert s.record_event(given) is given and given.device == torch.device("openreg:1")
    plain = torch.Event(device="openreg:1")
    assert s.record_event(plain) is plain
    s.synchronize()
    assert made.query() and given.query() and plain.query()


def test_an_event_on_an_idle_stream_is_complete_at_once():
    # A GPU passes such an event within microseconds; a queued record or wait left query() False until the
    # worker thread woke, which code polling query() right after wait_stream could see.
    torch.openreg.synchronize()
    idle, other = torch.openreg.Stream(), torch.openreg.Stream()
    other.wait_stream(idle)
    assert other.query() is True
    e = torch.openreg.Event(enable_timing=True)
    e.record(idle)
    assert e.query() is True
    end = idle.record_event(torch.openreg.Event(enable_timing=True))
    assert 0 <= e.elapsed_time(end) < 1000
    with torch.openreg.stream(idle):
        torch.openreg._sleep(200_000_000)
    busy = idle.record_event()
    other.wait_event(busy)
    assert busy.query() is False and other.query() is False  # work still queued is still waited for
    other.synchronize()
    assert busy.query() is True


def test_cross_device_copy_is_ordered_after_source_stream(two_devices):
    x = torch.zeros(1000, device="openreg:0")
    torch.openreg.synchronize()
    torch.openreg._sleep(300_000_000)
    x.fill_(4.0)
    y = x.to("openreg:1")
    assert_close(y.cpu(), torch.full((1000,), 4.0))


def test_stream_context_manager():
    s = torch.openreg.Stream()
    before = torch.openreg.current_stream()
    assert before.stream_id == 0
    with torch.openreg.stream(s):
        cur = torch.openreg.current_stream()
        assert cur.stream_id == s.stream_id
        assert cur == s
    assert torch.openreg.current_stream().stream_id == before.stream_id
    with torch.openreg.stream(None):
        assert torch.openreg.current_stream().stream_id == before.stream_id


def test_stream_context_switches_device(two_devices):
    s1 = torch.openreg.Stream(1)
    assert s1.device == torch.device("openreg:1")
    with torch.openreg.stream(s1):
        assert torch.openreg.current_device() == 1
        assert torch.openreg.current_stream().stream_id == s1.stream_id
        t = torch.empty(1, device="openreg")
    assert t.device == torch.device("openreg:1")
    assert torch.openreg.current_device() == 0
    assert torch.openreg.current_stream(1).stream_id == 0


def test_set_stream():
    s = torch.openreg.Stream()
    torch.openreg.set_stream(s)
    assert torch.openreg.current_stream().stream_id == s.stream_id
    torch.openreg.set_stream(torch.openreg.default_stream())
    assert torch.openreg.current_stream().stream_id == 0


def test_set_stream_of_another_device_makes_that_device_current(two_devices):
    """As torch.cuda.set_stream: the stream's device becomes the current one, so that the work that follows (and
    factories without an index) goes to that stream, not to the previous device's."""
    s = torch.openreg.Stream(device=two_devices[1])
    torch.openreg.set_stream(s)
    assert torch.openreg.current_device() == 1 and torch.openreg.current_stream() == s
    assert torch.empty(1, device="openreg").device == two_devices[1]


def test_default_stream(two_devices):
    for d in (0, 1):
        ds = torch.openreg.default_stream(d)
        assert ds.stream_id == 0
        assert ds.device == torch.device("openreg", d)
    assert torch.openreg.Stream().stream_id != 0


def test_the_pool_never_hands_out_the_reserved_streams():
    # The streams after the four priorities' pools are the collectives' (orccl queues work that
    # waits on other processes there).
    pools = {p: {torch.openreg.Stream(priority=p).stream_id for _ in range(100)} for p in (0, -1, -2, -3)}
    assert set().union(*pools.values()) == set(range(1, 129))


def test_stream_priorities_are_cudas(two_devices):
    least, greatest = torch.openreg.Stream.priority_range()
    assert (least, greatest) == (0, -3)  # torch.cuda.Stream.priority_range() on any GPU with 4+ levels
    assert torch.openreg.current_stream().priority == 0
    assert torch.openreg.default_stream(1).priority == 0
    for asked, given in [(0, 0), (-1, -1), (-2, -2), (-3, -3), (-7, -3), (4, 0)]:
        assert torch.openreg.Stream(priority=asked).priority == given, asked
    # Each priority draws from a pool of its own, through torch.Stream too (torch.get_device_module's callers).
    high = {torch.Stream("openreg:1", priority=-1).stream_id for _ in range(40)}
    normal = {torch.Stream("openreg:1").stream_id for _ in range(40)}
    assert len(high) == len(normal) == 32 and not high & normal
    device_type = torch.openreg.current_stream().device_type
    wrapped = torch.openreg.Stream(stream_id=min(high), device_index=1, device_type=device_type)
    assert wrapped.priority == -1
    unknown = torch.openreg.Stream(stream_id=500, device_index=0, device_type=device_type)
    with pytest.raises(RuntimeError, match="openreg stream id 500 does not exist"):
        torch.ones(2, device="openreg").record_stream(unknown)


def test_work_on_streams_of_every_priority_runs_in_their_order():
    x = torch.zeros(1000, device="openreg")
    for value, priority in enumerate((0, -1, -2, -3), start=1):
        s = torch.openreg.Stream(priority=priority)
        s.wait_stream(torch.openreg.current_stream())
        with torch.openreg.stream(s):
            torch.openreg._sleep(5_000_000)  # a later stream's write would overtake this one's, were they not ordered
            x.fill_(float(value))
        torch.openreg.current_stream().wait_stream(s)
        x.record_stream(s)
    assert_close(x.cpu(), torch.full((1000,), 4.0))


def test_current_stream_is_per_thread():
    import threading

    s = torch.openreg.Stream()
    torch.openreg.set_stream(s)
    seen = []
    th = threading.Thread(target=lambda: seen.append(torch.openreg.current_stream().stream_id))
    th.start()
    th.join(30)
    assert seen == [0]
    assert torch.openreg.current_stream().stream_id == s.stream_id


def test_generic_torch_stream_without_index_uses_current_device(two_devices):
    s = torch.Stream(device="openreg")
    assert s.device == torch.device("openreg:0")
    with torch.openreg.device(1):
        s1 = torch.Stream(device="openreg")
    assert s1.device == torch.device("openreg:1")


def test_generic_torch_stream_and_event(two_devices):
    s = torch.Stream(device="openreg:1")
    assert s.device == torch.device("openreg:1")
    assert s.stream_id != 0
    start = torch.Event(device="openreg:1", enable_timing=True)
    end = torch.Event(device="openreg:1", enable_timing=True)
    start.record(s)
    with torch.openreg.stream(s):
        torch.openreg._sleep(100_000_000)
    end.record(s)
    assert not s.query()
    assert not end.query()
    end.synchronize()
    assert end.query() and s.query()
    assert start.elapsed_time(end) >= 90
    s.synchronize()


def test_generic_stream_wait_event(two_devices):
    a = torch.Stream(device="openreg:0")
    b = torch.Stream(device="openreg:0")
    x = torch.zeros(1000, device="openreg")
    torch.openreg.synchronize()
    _slow_fill(a, x, 5.0)
    ev = a.record_event()
    b.wait_event(ev)
    with torch.openreg.stream(b):
        y = x.cpu()
    assert_close(y, torch.full((1000,), 5.0))


def test_launch_blocking(run_python, describe_proc):
    code = """
        import torch, openreg_runtime
        s = torch.openreg.current_stream()
        torch.openreg._sleep(200_000_000)
        print(s.query())
        torch.openreg.synchronize()
    """
    blocking = run_python(code, env={"OPENREG_LAUNCH_BLOCKING": "1"})
    normal = run_python(code)
    assert blocking.returncode == 0, describe_proc(blocking)
    assert normal.returncode == 0, describe_proc(normal)
    assert blocking.stdout.split() == ["True"]
    assert normal.stdout.split() == ["False"]


def test_async_failure_is_raised_at_next_synchronize():
    C._fail("boom")
    with pytest.raises(RuntimeError) as info:
        torch.openreg.synchronize()
    msg = str(info.value)
    assert "boom" in msg
    assert "injected failure" in msg
    # The device still works, and the error is reported once.
    src = torch.arange(100, dtype=torch.float32)
    assert_close(src.to("openreg").cpu(), src)
    torch.openreg.synchronize()


def test_async_failure_on_side_stream_raised_by_device_synchronize():
    s = torch.openreg.Stream()
    with torch.openreg.stream(s):
        C._fail("side stream boom")
    with pytest.raises(RuntimeError, match="side stream boom"):
        torch.openreg.synchronize()
    torch.openreg.synchronize()
    assert_close(torch.ones(3, device="openreg").cpu(), torch.ones(3))


@pytest.mark.parametrize("call", ["device", "accelerator", "stream", "event", "cpu", "item"])
def test_async_failure_is_raised_by_any_synchronising_call(call):
    t = torch.ones((), device="openreg")
    torch.openreg.synchronize()
    C._fail(f"boom via {call}")
    with pytest.raises(RuntimeError, match=f"boom via {call}"):
        if call == "device":
            torch.openreg.synchronize()
        elif call == "accelerator":
            torch.accelerator.synchronize()
        elif call == "stream":
            torch.openreg.current_stream().synchronize()
        elif call == "event":
            torch.openreg.current_stream().record_event().synchronize()
        elif call == "cpu":
            t.cpu()
        else:
            t.item()
    torch.openreg.synchronize()  # reported once


def test_async_failure_belongs_to_its_device(two_devices):
    with torch.openreg.device(1):
        C._fail("boom on one")
    torch.openreg.synchronize(0)
    with pytest.raises(RuntimeError, match="boom on one"):
        torch.openreg.synchronize(1)
    torch.openreg.synchronize(1)


def test_elapsed_time_before_completion_is_an_error():
    start = torch.openreg.Event(enable_timing=True)
    end = torch.openreg.Event(enable_timing=True)
    start.record()
    torch.openreg._sleep(300_000_000)
    end.record()
    with pytest.raises((RuntimeError, ValueError)):
        start.elapsed_time(end)
    end.synchronize()
    assert start.elapsed_time(end) >= 250


def test_event_records_on_another_devices_stream(two_devices):
    s1 = torch.openreg.Stream(1)
    e = torch.openreg.Event()
    with torch.openreg.stream(s1):
        torch.openreg._sleep(200_000_000)
    e.record(s1)
    assert e.device == torch.device("openreg:1")
    assert not e.query()
    e.synchronize()
    assert e.query()


def test_cross_device_copy_is_ordered_after_destination_work(two_devices):
    x = torch.full((1000,), 2.0, device="openreg:0")
    y = torch.zeros(1000, device="openreg:1")
    torch.openreg.synchronize()
    with torch.openreg.device(1):
        torch.openreg._sleep(300_000_000)
        y.fill_(1.0)  # queued on openreg:1 before the copy
    y.copy_(x)
    assert_close(y.cpu(), torch.full((1000,), 2.0))


def test_launch_blocking_reports_failures_at_the_call(run_python, describe_proc):
    proc = run_python(
        """
        import torch, openreg_runtime, openreg_runtime._C as C
        try:
            C._fail('boom')
        except RuntimeError as e:
            print('raised', 'boom' in str(e))
        else:
            print('not raised')
        torch.openreg.synchronize()
        """,
        env={"OPENREG_LAUNCH_BLOCKING": "1"},
    )
    assert proc.returncode == 0, describe_proc(proc)
    assert proc.stdout.split() == ["raised", "True"]


def test_synchronize_releases_what_finished_work_captured():
    # A queued copy holds its CPU source until it has run; finished work is destroyed by the host (at its next
    # launch or wait), so after a synchronize nothing of it keeps the source alive.
    src = torch.rand(4096).pin_memory()
    alive = weakref.ref(src)
    with torch.openreg.stream(torch.openreg.Stream()):
        torch.openreg._sleep(50_000_000)
        dst = src.to("openreg", non_blocking=True)
    del src
    gc.collect()
    torch.openreg.synchronize()
    assert alive() is None
    assert dst.cpu().shape == (4096,)
