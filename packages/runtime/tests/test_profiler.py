"""torch.autograd.profiler.profile(use_device="openreg") times every op on the device as it does with
use_device="cuda": openreg registers PrivateUse1 profiler methods (glue/profiler.cpp), which record openreg
events; torch's defaults raise on every op. torch.profiler.profile with ProfilerActivity.PrivateUse1 records each
task a stream ran as a device event (glue/kineto.cpp). Copies, fill_ and _sleep suffice here (they are the
runtime's own work)."""

from __future__ import annotations

import json

import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler import profile
from torch.profiler import ProfilerActivity
from torch.profiler import profile as trace_profile

BOTH = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


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



def _device_events(prof) -> list:
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def test_a_sleep_on_a_side_stream_is_a_device_event_of_its_length_on_that_stream():
    side = torch.openreg.Stream()
    with trace_profile(activities=BOTH) as prof:
        with torch.openreg.stream(side):
            torch.openreg._sleep(50_000_000)
        torch.openreg.synchronize()
    sleeps = [e for e in _device_events(prof) if e.name == "sleep kernel"]
    assert len(sleeps) == 1, [e.name for e in _device_events(prof)]
    (sleep,) = sleeps
    assert 45_000 <= sleep.time_range.elapsed_us() < 1_000_000
    assert (sleep.device_index, sleep.device_resource_id) == (0, side.stream_id)


def test_copies_are_device_events_linked_to_the_ops_that_launched_them():
    x = torch.arange(1 << 16, dtype=torch.float32)
    with trace_profile(activities=BOTH) as prof:
        y = x.to("openreg")
        y.fill_(2.0)
        assert y.cpu()[0].item() == 2.0
    names = {e.name for e in _device_events(prof)}
    assert {"copy (host to openreg)", "copy (openreg to host)"} <= names, names
    ops = {e.id: e for e in prof.events() if e.device_type == DeviceType.CPU and e.linked_correlation_id == 0}
    for kernel in _device_events(prof):
        if kernel.name.startswith("copy ("):
            op = ops[kernel.linked_correlation_id]
            assert op.name.startswith("aten::"), op.name
            # One clock: the device work starts after its op did, and within the profile.
            assert op.time_range.start <= kernel.time_range.start <= kernel.time_range.end
    # As on CUDA: the kernels have rows of their own, and the ops that launched them count their time.
    timed = {e.key for e in prof.key_averages() if e.self_device_time_total > 0}
    assert "copy (openreg to host)" in timed and "aten::fill_" in timed, timed


def test_the_chrome_trace_has_a_track_per_stream_and_arrows_from_launches_to_kernels(tmp_path):
    side = torch.openreg.Stream()
    y = torch.empty(1 << 16, device="openreg")
    with trace_profile(activities=BOTH) as prof:
        y.fill_(1.0)
        with torch.openreg.stream(side):
            torch.openreg._sleep(5_000_000)
        torch.openreg.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]

    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]
    assert {(e["name"], e["pid"], e["tid"]) for e in kernels} >= {("sleep kernel", 0, side.stream_id)}
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert tracks[(0, side.stream_id)] == f"stream {side.stream_id}"
    labels = {e["pid"]: e["args"]["labels"] for e in events if e.get("name") == "process_labels"}
    assert labels[0] == "openreg:0" and "GPU 0" not in labels.values(), labels

    launches = [e for e in events if e.get("cat") == "privateuse1_runtime"]
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = {e["id"]: e for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    assert launches and starts and starts.keys() == ends.keys()
    for flow, end in ends.items():
        assert (starts[flow]["pid"], starts[flow]["tid"]) in {(e["pid"], e["tid"]) for e in launches}
        assert end["pid"] == 0 and starts[flow]["ts"] <= end["ts"]


def test_nothing_is_recorded_outside_a_profile_and_profiles_follow_each_other():
    x = torch.ones(1024)
    for _ in range(2):
        with trace_profile(activities=BOTH) as prof:
            x.to("openreg").cpu()
        assert len([e for e in _device_events(prof) if e.name.startswith("copy (")]) == 2
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        torch.openreg._sleep(20_000_000)  # launched before the profile, running during it: no launch to tag it with
    x.to("openreg").cpu()
    with trace_profile(activities=BOTH) as idle:
        pass
    assert [e.name for e in _device_events(idle) if e.name.startswith("copy (")] == []


def test_a_cpu_only_profile_records_no_device_events():
    with trace_profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(1024).to("openreg").cpu()
    assert _device_events(prof) == []
    assert "aten::copy_" in {e.name for e in prof.events()}
