"""The stream sanitizer (OPENREG_SANITIZE=streams, torch.openreg.set_stream_sanitizer): planted stream bugs are
reported with both ops, both streams and both launching lines; properly ordered code reports nothing. Only what
openreg-runtime alone provides is used here (copies, fill_), as its install variant runs these tests alone."""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve()


def _line() -> int:
    """The caller's line number: the next line launches the op a report must point at."""
    return sys._getframe(1).f_lineno + 1


@pytest.fixture
def sanitizer():
    torch.openreg.set_stream_sanitizer("error")
    yield torch.openreg.set_stream_sanitizer
    torch.openreg.synchronize()
    torch.openreg.set_stream_sanitizer("off")


def _device_tensor(value: float, n: int = 1024) -> torch.Tensor:
    return torch.full((n,), value).to("openreg")


def _site(line: int) -> str:
    return f'File "{HERE}", line {line}'


def test_modes_are_set_by_name_and_read_back():
    started = {"streams": "error", "streams:warn": "warn"}.get(os.environ.get("OPENREG_SANITIZE", ""), "off")
    assert torch.openreg.get_stream_sanitizer() == started
    for mode in ("error", "warn", "off"):
        torch.openreg.set_stream_sanitizer(mode)
        assert torch.openreg.get_stream_sanitizer() == mode
    with pytest.raises(ValueError, match="'loud'.*one of off, error, warn"):
        torch.openreg.set_stream_sanitizer("loud")


def test_read_of_memory_another_stream_writes_is_reported_with_both_sites(sanitizer):
    x, y = _device_tensor(0.0), _device_tensor(0.0)
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        torch.openreg._sleep(50_000_000)
        write_line = _line()
        x.fill_(1.0)
    with pytest.raises(RuntimeError) as info:
        read_line = _line()
        y.copy_(x)  # the bug: the default stream does not wait for `side`
    report = str(info.value)
    assert "unsynchronized use of device memory" in report
    assert "'copy (openreg)' on openreg:0 stream 0 reads" in report
    assert f"that 'fill_' on openreg:0 stream {side.stream_id} writes" in report
    assert _site(read_line) in report and _site(write_line) in report
    assert "wait_stream" in report
    # The refused copy was not queued: y keeps its value once the device is done.
    torch.openreg.synchronize()
    assert y.cpu().eq(0).all()


def test_write_of_memory_another_stream_reads_is_reported(sanitizer):
    x, y = _device_tensor(1.0), _device_tensor(0.0)
    side = torch.openreg.Stream()
    torch.openreg._sleep(50_000_000)
    y.copy_(x)  # reads x on the default stream
    with torch.openreg.stream(side), pytest.raises(RuntimeError) as info:
        x.fill_(2.0)  # the bug: `side` overwrites x before the default stream has read it
    assert f"'fill_' on openreg:0 stream {side.stream_id} writes" in str(info.value)
    assert "that 'copy (openreg)' on openreg:0 stream 0 reads" in str(info.value)


def test_blocking_copy_to_the_host_of_memory_another_stream_writes_is_reported(sanitizer):
    x = _device_tensor(0.0)
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        torch.openreg._sleep(50_000_000)
        x.fill_(1.0)
    with pytest.raises(RuntimeError, match=r"'copy \(openreg to host\)' on openreg:0 stream 0 reads .* 'fill_'"):
        x.cpu()


@pytest.mark.parametrize("order", ["wait_stream", "event", "synchronize", "stream_synchronize", "event_query"])
def test_properly_ordered_streams_report_nothing(sanitizer, order):
    x, y = _device_tensor(0.0), _device_tensor(0.0)
    main, side = torch.openreg.current_stream(), torch.openreg.Stream()
    side.wait_stream(main)  # x and y were written on the default stream
    with torch.openreg.stream(side):
        torch.openreg._sleep(20_000_000)
        x.fill_(1.0)
        done = torch.openreg.Event()
        done.record()
    if order == "wait_stream":
        main.wait_stream(side)
    elif order == "event":
        main.wait_event(done)
    elif order == "synchronize":
        torch.openreg.synchronize()
    elif order == "stream_synchronize":
        side.synchronize()
    else:
        while not done.query():
            pass
    y.copy_(x)
    assert y.cpu().eq(1).all()
    # and back: the side stream writes again once it has waited for the default stream's read
    side.wait_stream(main)
    with torch.openreg.stream(side):
        x.fill_(2.0)
    main.wait_stream(side)
    assert x.cpu().eq(2).all()


def test_reads_on_two_streams_do_not_conflict(sanitizer):
    x, a, b = _device_tensor(3.0), _device_tensor(0.0), _device_tensor(0.0)
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        a.copy_(x)
    b.copy_(x)
    torch.openreg.current_stream().wait_stream(side)
    assert a.cpu().eq(3).all() and b.cpu().eq(3).all()


def _free_used_on_side_stream(record: bool) -> tuple[torch.Tensor, int]:
    """Frees a tensor the side stream still writes (recorded on it or not); returns the new tensor that reuses its
    memory and the line that wrote on the side stream."""
    torch.openreg.empty_cache()  # so that the next allocation of this size takes x's block
    side = torch.openreg.Stream()
    x = torch.empty(4096, device="openreg")
    ptr = x.data_ptr()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        torch.openreg._sleep(50_000_000)
        line = _line()
        x.fill_(1.0)
    if record:
        x.record_stream(side)
    del x
    y = torch.empty(4096, device="openreg")
    assert record or y.data_ptr() == ptr, "the allocator did not hand the freed block out again"
    return y, line


def test_memory_freed_while_another_stream_uses_it_is_reported_as_a_missing_record_stream(sanitizer):
    y, side_line = _free_used_on_side_stream(record=False)
    with pytest.raises(RuntimeError) as info:
        new_line = _line()
        y.fill_(2.0)
    report = str(info.value)
    assert "freed and reused while another stream may still use it" in report
    assert "record_stream" in report
    assert _site(side_line) in report and _site(new_line) in report


def test_record_stream_makes_the_reuse_clean(sanitizer):
    y, _ = _free_used_on_side_stream(record=True)
    y.fill_(2.0)
    assert y.cpu().eq(2).all()


def test_warn_mode_reports_and_runs_the_work(sanitizer):
    sanitizer("warn")
    x, y = _device_tensor(0.0), _device_tensor(0.0)
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        x.fill_(1.0)
    time.sleep(0.3)  # the fill has run by now, but nothing the program did says so: still a bug
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y.copy_(x)
    (report,) = [w for w in caught if "stream sanitizer" in str(w.message)]
    assert "'copy (openreg)'" in str(report.message) and "'fill_'" in str(report.message)
    assert report.filename == __file__
    torch.openreg.synchronize()
    assert y.cpu().eq(1).all()  # the copy was queued and ran


def test_off_reports_nothing():
    x, y = _device_tensor(0.0), _device_tensor(0.0)
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        x.fill_(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y.copy_(x)
    torch.openreg.synchronize()


def test_environment_variable_turns_it_on_and_a_bad_value_is_named(run_python):
    code = "import torch, openreg_runtime\nprint(torch.openreg.get_stream_sanitizer())\n"
    assert run_python(code, env={"OPENREG_SANITIZE": "streams"}).stdout.split() == ["error"]
    assert run_python(code, env={"OPENREG_SANITIZE": "streams:warn"}).stdout.split() == ["warn"]
    bad = run_python(code, env={"OPENREG_SANITIZE": "threads"})
    assert bad.returncode != 0
    assert "OPENREG_SANITIZE='threads' is not a sanitizer" in bad.stderr


def test_strict_mode_fault_names_the_unfinished_writer(run_python):
    code = """
import ctypes, torch, openreg_runtime
x = torch.zeros(1024).to("openreg")
side = torch.openreg.Stream()
side.wait_stream(torch.openreg.current_stream())
with torch.openreg.stream(side):
    torch.openreg._sleep(2000_000_000)
    x.fill_(1.0)
ctypes.c_float.from_address(x.data_ptr()).value  # the bug: no synchronize before the host reads
"""
    run = run_python(code, env={"OPENREG_STRICT": "1", "OPENREG_SANITIZE": "streams"})
    assert run.returncode != 0
    assert "strict mode: the host touched device memory" in run.stderr
    assert "'fill_', queued on openreg:0 stream" in run.stderr and "has not run yet" in run.stderr
