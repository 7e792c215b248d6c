"""torch.autograd.profiler.profile(use_device="openreg") times every op on the device as it does with
use_device="cuda": openreg registers PrivateUse1 profiler methods (glue/profiler.cpp), which record openreg
events; torch's defaults raise on every op. Copies suffice here (they are the runtime's own ops)."""

from __future__ import annotations

import pytest
import torch
from torch.autograd.profiler import profile


def _copies(device: str) -> None:
    x = torch.arange(4096.0)
    for _ in range(3):
        y = x.to(device)
        x = y.cpu()


@pytest.mark.filterwarnings("error")  # torch's default methods raise, and the profiler turns that into warnings
def test_each_op_gets_a_device_time_and_no_time_is_negative():
    _copies("openreg")
    with profile(use_device="openreg") as prof:
        _copies("openreg")
    events = prof.function_events
    assert events, "nothing was recorded"
    assert all(e.cpu_time_total >= 0 for e in events), [(e.name, e.cpu_time_total) for e in events]
    copies = [e for e in events if e.name == "aten::copy_"]
    assert copies and all(e.device_time_total >= 0 for e in copies)
    assert sum(e.device_time_total for e in copies) > 0, "no device time was measured"
    totals = prof.key_averages()
    assert {"aten::copy_", "aten::_to_copy"} <= {e.key for e in totals}


def test_the_same_ops_are_recorded_as_without_the_device():
    with profile() as cpu_only:
        _copies("openreg")
    with profile(use_device="openreg") as with_device:
        _copies("openreg")
    assert [e.name for e in with_device.function_events] == [e.name for e in cpu_only.function_events]

