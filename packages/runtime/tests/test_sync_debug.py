"""torch.openreg.set_sync_debug_mode, as torch.cuda's: each call that blocks the host on the device warns ("warn")
or raises ("error") at the user's line, naming the call; synchronize() and stream/event waits are exempt."""

from __future__ import annotations

import warnings

import pytest
import torch


@pytest.fixture
def sync_debug():
    def set_mode(mode):
        torch.openreg.set_sync_debug_mode(mode)

    yield set_mode
    torch.openreg.set_sync_debug_mode("default")


def _reports(fn) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [w for w in caught if "synchronizing openreg operation" in str(w.message)]


def test_modes_are_set_by_name_or_number_and_read_back(sync_debug):
    assert torch.openreg.get_sync_debug_mode() == 0
    for name, number in [("warn", 1), ("error", 2), ("default", 0)]:
        sync_debug(name)
        assert torch.openreg.get_sync_debug_mode() == number
        sync_debug(number)
        assert torch.openreg.get_sync_debug_mode() == number
    with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`"):
        sync_debug("loud")
    with pytest.raises(RuntimeError, match="expected one of 0, 1, 2"):
        sync_debug(3)


@pytest.mark.parametrize("call, words", [
    (lambda x: x.cpu(), "copy (openreg to host)"),
    (lambda x: x.tolist(), "copy (openreg to host)"),
    (lambda x: x[0].item(), "reading a scalar"),
    (lambda x: torch.ones(3).to("openreg"), "copy (host to openreg)"),
])
def test_blocking_calls_warn_at_the_users_line(sync_debug, call, words):
    x = torch.arange(4.0).to("openreg")  # the runtime alone has copies, not compute
    sync_debug("warn")
    (report,) = _reports(lambda: call(x))
    assert words in str(report.message)
    assert report.filename == __file__, report.filename  # the line that made the call


def test_error_mode_raises_and_the_device_stays_usable(sync_debug):
    x = torch.arange(4.0).to("openreg")
    sync_debug("error")
    with pytest.raises(RuntimeError, match="called a synchronizing openreg operation, reading a scalar"):
        x[1].item()
    sync_debug("default")
    assert x[1].item() == 1.0


def test_synchronize_queued_work_and_non_blocking_copies_are_exempt(sync_debug):
    x = torch.arange(4.0).to("openreg")
    ones = torch.ones(4).to("openreg")
    pinned = torch.empty(4).pin_memory()
    sync_debug("error")

    def quiet():
        x.copy_(ones)  # a copy between device tensors: queued
        pinned.copy_(x, non_blocking=True)
        y = torch.ones(4).pin_memory().to("openreg", non_blocking=True)
        torch.openreg.synchronize()
        s = torch.openreg.Stream()
        s.wait_stream(torch.openreg.current_stream())
        s.synchronize()
        e = torch.openreg.Event()
        e.record()
        e.synchronize()
        return y

    assert _reports(quiet) == []
    sync_debug("default")
    assert pinned.tolist() == [1.0, 1.0, 1.0, 1.0]
