"""The profilers on openreg's compute ops: torch.profiler.profile with ProfilerActivity.PrivateUse1 shows each
kernel as a device event on its stream, linked to the op that launched it (glue/kineto.cpp), and
torch.autograd.profiler.profile(use_device="openreg") reports device time for the ops, with Kineto
(use_kineto=True) or with openreg's timed events (glue/profiler.cpp)."""

from __future__ import annotations

import json

import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler import profile
from torch.profiler import ProfilerActivity
from torch.profiler import profile as trace_profile

from openreg_runtime.testing import describe, run_python

BOTH = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _work(a: torch.Tensor) -> torch.Tensor:
    b = a @ a
    return (b + 1).cpu()


def test_mm_and_add_get_device_time_from_their_kernels():
    a = torch.randn(256, 256, device="openreg")
    _work(a)
    with trace_profile(activities=BOTH) as prof:
        _work(a)
    totals = {e.key: e for e in prof.key_averages()}
    for op in ("aten::mm", "aten::add"):
        assert totals[op].self_device_time_total > 0, (op, totals[op].self_device_time_total)
        assert totals[op].device_type == DeviceType.CPU and totals[op].count == 1
        assert totals[f"{op} kernel"].device_type == DeviceType.PrivateUse1
    kernels = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    assert {k.device_index for k in kernels} == {0}
    ops = {e.id: e for e in prof.events() if e.device_type == DeviceType.CPU and e.linked_correlation_id == 0}
    assert {ops[k.linked_correlation_id].name for k in kernels} >= {"aten::mm", "aten::add"}
    table = prof.key_averages().table(sort_by="device_time_total")
    assert "Self OPENREG" in table


def test_the_chrome_trace_links_each_launch_to_its_kernel_on_the_stream_it_ran_on(tmp_path):
    a = torch.randn(128, 128, device="openreg")
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    a @ a, a + a  # an op's first call runs at the call, not launched
    torch.openreg.synchronize()
    with trace_profile(activities=BOTH) as prof:
        a @ a
        with torch.openreg.stream(side):
            a + a
        torch.openreg.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]  # what chrome://tracing and Perfetto load
    linked = [e for e in events if "External id" in e.get("args", {})]
    ops = {e["args"]["External id"]: e for e in linked if e["cat"] == "cpu_op"}
    kernels = [e for e in linked if e["cat"] == "kernel"]
    on = {ops[k["args"]["External id"]]["name"]: (k["pid"], k["tid"]) for k in kernels}
    assert on["aten::mm"] == (0, 0) and on["aten::add"] == (0, side.stream_id), on
    for k in kernels:
        op = ops[k["args"]["External id"]]
        assert op["ts"] <= k["ts"], (op, k)  # one clock: no kernel before its op
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    ends = {e["id"]: e for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    assert {(e["pid"], e["tid"]) for e in ends.values()} >= {(0, 0), (0, side.stream_id)}
    assert starts.keys() == ends.keys()


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("use_kineto", [False, True])
def test_use_device_openreg_times_the_ops_on_the_device(use_kineto, capfd):
    a = torch.randn(256, 256, device="openreg")
    _work(a)
    with profile(use_device="openreg", use_kineto=use_kineto) as prof:
        _work(a)
    events = prof.function_events
    assert all(e.cpu_time_total >= 0 and e.device_time_total >= 0 for e in events)
    totals = {e.key: e for e in prof.key_averages()}
    assert totals["aten::mm"].device_time_total > 0
    assert "Self OPENREG" in prof.key_averages().table()
    err = capfd.readouterr().err
    assert "not enabled" not in err and "INTERNAL ASSERT" not in err, err


def test_a_profile_started_before_the_device_is_touched_records_its_kernels():
    # Kineto collects its profilers as the first profile starts; openreg's loads nothing but a forwarder until then.
    proc = run_python("""
        import torch
        from torch.profiler import profile, ProfilerActivity
        def glue_loaded():
            return "libopenreg_glue" in open("/proc/self/maps").read()
        assert not glue_loaded(), "import torch loaded the device"
        with profile(activities=[ProfilerActivity.CPU]):
            torch.ones(4)
        assert not glue_loaded(), "a CPU-only profile loaded the device"
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            a = torch.ones(64, 64, device="openreg")
            (a @ a).cpu()
        device = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
        print(device)
        assert device, "no device events"
        assert prof.key_averages().self_cpu_time_total > 0
    """)
    assert proc.returncode == 0, describe(proc)
