"""`import torch` registers the device through the entry point, stays cheap, and any import order works."""

from __future__ import annotations

from importlib import metadata

import pytest
from autoload_helpers import VERSION

from openreg_runtime.testing import run_json, run_python

HEAVY = ["torch._dynamo", "torch._inductor", "openreg_inductor", "openreg_runtime", "openreg_eager"]


def test_entry_point_is_declared():
    points = [e for e in metadata.entry_points(group="torch.backends") if e.name == "openreg"]
    assert [e.value for e in points] == ["openreg:_autoload"]
    requires = set(metadata.requires("openreg"))
    pinned = {f"openreg-runtime=={VERSION}", f"openreg-eager=={VERSION}",
              f"openreg-inductor=={VERSION}; extra == 'compile'"}
    assert pinned <= requires


def test_import_torch_alone_gives_a_working_device():
    out = run_python("import torch; print(torch.ones(2, device='openreg') * 3)", args=["-W", "error"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tensor([3., 3.], device='openreg:0')"
    assert out.stderr == ""


def test_import_torch_registers_but_loads_nothing_heavy():
    state = run_json(f"""
        import json, sys, torch
        loaded = [m for m in {HEAVY!r} if m in sys.modules]
        names = (torch._C._get_privateuse1_backend_name(), str(torch.device("openreg:1")))
        # Asking whether the device exists, as optimizers and device-agnostic code do, loads nothing either.
        answers = (torch.accelerator.current_accelerator().type, torch.accelerator.is_available())
        # torch.distributed knows openreg's backend, orccl (init_process_group() with no backend picks it).
        import torch.distributed as dist
        answers += (dist.Backend.default_device_backend_map["openreg"], dist.Backend.backend_capability["orccl"])
        print(json.dumps({{"loaded": loaded, "names": names, "answers": answers,
                          "after": [m for m in {HEAVY!r} if m in sys.modules]}}))
    """)
    assert state["loaded"] == []
    assert state["names"] == ["openreg", "openreg:1"]
    assert state["answers"] == ["openreg", True, "orccl", ["openreg"]]
    assert state["after"] == []


def test_autoload_off_then_import_openreg_enables_the_device():
    out = run_python("""
        import torch
        try:
            torch.device("openreg")
        except RuntimeError:
            print("not registered")
        import openreg
        print(torch.arange(3.0, device="openreg").sum().item())
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, args=["-W", "error"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["not registered", "3.0"]


# (imports, whether they also work with autoload off: only when `import openreg` is among them)
ORDERS = [
    ("import torch", False),
    ("import openreg_runtime", False),
    ("import openreg_eager", False),
    ("import openreg", True),
    ("import openreg; import torch; import openreg", True),
    ("import torch; import openreg; import importlib; importlib.reload(openreg)", True),
    ("import torch; import openreg_runtime; import openreg", True),
    ("import openreg_eager; import openreg", True),
    ("import openreg_runtime; import torch; x = torch.empty(1, device='openreg'); import openreg", True),
]


@pytest.mark.parametrize(("imports", "autoload"), [(i, a) for i, off_too in ORDERS for a in ["1", "0"][:1 + off_too]])
def test_any_import_order_works(imports: str, autoload: str):
    out = run_python(f"""
        {imports}
        import torch
        x = torch.arange(4.0, device="openreg:1")
        print((x * 2).sum().item(), torch.openreg.device_count())
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": autoload}, args=["-W", "error"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["12.0", "2"]


def test_first_use_from_many_threads_at_once():
    out = run_python("""
        import threading, torch
        results, start = [], threading.Barrier(8)
        def use(i):
            start.wait()
            results.append((torch.full((4,), float(i), device=f"openreg:{i % 2}") + 1).sum().item())
        threads = [threading.Thread(target=use, args=(i,)) for i in range(8)]
        for t in threads: t.start()
        for t in threads: t.join()
        print(sorted(results))
    """, args=["-W", "error"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([4.0 * (i + 1) for i in range(8)])


def test_the_device_module_and_tensor_methods_work_before_first_use():
    state = run_json("""
        import json, torch
        from torch import openreg as early  # a reference taken before the layers load
        count, name = torch.openreg.device_count(), torch.openreg.get_device_name(0)
        moved = torch.ones(2).openreg()
        print(json.dumps({"count": count, "name": name, "moved": str(moved.device), "is": moved.is_openreg,
                          "early": early.current_device(), "same": torch.openreg.synchronize is early.synchronize}))
    """)
    assert state == {"count": 2, "name": state["name"], "moved": "openreg:0", "is": True, "early": 0, "same": True}


def test_dir_of_the_device_module_before_first_use_lists_its_api():
    # Tab completion and dir()-driven code (hasattr scans, inspect) see what torch.openreg.<name> gives.
    state = run_json("""
        import json, torch
        names = dir(torch.openreg)
        from openreg_runtime import device
        print(json.dumps({"missing": sorted(set(device.__all__) - set(names))}))
    """)
    assert state == {"missing": []}


def test_openreg_init_loads_everything_up_front():
    # Some C++ entry points (generators, streams, pinned memory) do not ask torch.openreg first.
    out = run_python("""
        import torch, openreg
        openreg.init()
        print(torch.Generator("openreg").device, torch.Stream("openreg").device, torch.ones(2).pin_memory().is_pinned())
    """, args=["-W", "error"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["openreg:0", "openreg:0", "True"]
