"""C++ entry points work right after `import torch`, before anything loaded openreg's layers: torch reaches the
device through C++ registries (hooks, device guard, allocator) that libopenreg_lazy fills at autoload. Each
script first checks that the layers are not loaded yet, so that a test cannot pass by way of an earlier use of
`torch.openreg`."""

from __future__ import annotations

import textwrap

import pytest

from openreg_runtime.testing import run_json

FRESH = """
    import json, sys, torch
    assert "openreg_runtime" not in sys.modules and not torch.openreg.is_initialized()
"""


def _fresh(code: str) -> dict:
    return run_json(textwrap.dedent(FRESH) + textwrap.dedent(code), args=["-W", "error"])


def test_pin_memory_and_a_pinning_data_loader():
    out = _fresh("""
        from torch.utils.data import DataLoader, TensorDataset
        x = torch.arange(6.0)
        pinned = x.pin_memory()
        batches = list(DataLoader(TensorDataset(x), batch_size=4, pin_memory=True))
        print(json.dumps({"pinned": [x.is_pinned(), pinned.is_pinned()], "same": pinned.tolist() == x.tolist(),
                          "batches": [b[0].is_pinned() for b in batches]}))
    """)
    assert out == {"pinned": [False, True], "same": True, "batches": [True, True]}


def test_a_generator_made_first_draws_as_one_made_later():
    out = _fresh("""
        early = torch.Generator("openreg").manual_seed(7)
        first = torch.randn(5, device="openreg", generator=early).tolist()
        late = torch.Generator("openreg").manual_seed(7)
        print(json.dumps({"device": str(early.device), "first": first,
                          "again": torch.randn(5, device="openreg", generator=late).tolist()}))
    """)
    assert out["device"] == "openreg:0"
    assert out["first"] == out["again"]


def test_streams_and_events_made_first_keep_working():
    out = _fresh("""
        stream = torch.Stream("openreg:1")
        start, end = (torch.Event(device="openreg", enable_timing=True) for _ in range(2))
        start.record()
        with stream:
            y = torch.ones(3, device="openreg:1") * 2
        end.record()
        end.synchronize()
        print(json.dumps({"stream": str(stream.device), "y": y.tolist(),
                          "done": [end.query(), stream.query()], "elapsed": start.elapsed_time(end) >= 0}))
    """)
    assert out == {"stream": "openreg:1", "y": [2.0, 2.0, 2.0], "done": [True, True], "elapsed": True}


def test_an_accelerator_graph_made_first_captures_and_replays():
    out = _fresh("""
        graph = torch.accelerator.Graph()
        x = torch.zeros(3, device="openreg")
        with torch.Stream("openreg"), graph:
            x.add_(1)
        captured = x.tolist()
        graph.replay()
        graph.replay()
        print(json.dumps({"captured": captured, "replayed": x.tolist()}))
    """)
    assert out == {"captured": [0.0, 0.0, 0.0], "replayed": [2.0, 2.0, 2.0]}


def test_accelerator_memory_statistics_before_and_after_allocating():
    out = _fresh("""
        before = (torch.accelerator.memory_allocated(), torch.accelerator.device_count(),
                  torch.accelerator.current_device_index())
        x = torch.empty(1024, device="openreg")
        print(json.dumps({"before": before, "after": torch.accelerator.memory_allocated(),
                          "peak": torch.accelerator.max_memory_allocated()}))
    """)
    assert out["before"] == [0, 2, 0]
    assert out["after"] >= 4096 and out["peak"] >= out["after"]


def test_cpu_only_gloo_code_is_not_broken_by_the_installed_device(tmp_path):
    out = _fresh(f"""
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://{tmp_path / 'store'}", rank=0, world_size=1)
        gathered = [None]
        dist.all_gather_object(gathered, {{"rank": 0, "value": [1, 2]}})
        dist.destroy_process_group()
        print(json.dumps({{"gathered": gathered}}))
    """)
    assert out == {"gathered": [{"rank": 0, "value": [1, 2]}]}


def test_a_profile_of_the_device_started_first():
    # libopenreg_lazy's profiler methods load the glue on the first op, as a CUDA profile starts CUDA.
    out = _fresh("""
        from torch.autograd.profiler import profile
        with profile(use_device="openreg") as prof:
            x = torch.ones(1000).to("openreg").cpu()
        copies = [e.device_time_total for e in prof.function_events if e.name == "aten::copy_"]
        print(json.dumps({"negative": [e.name for e in prof.function_events if e.cpu_time_total < 0],
                          "device_time": sum(copies) > 0}))
    """)
    assert out == {"negative": [], "device_time": True}


def test_a_size_only_sparse_constructor_made_first():
    # The one tensor constructor that does not ask torch.openreg first: libopenreg_lazy loads the layers for it.
    out = _fresh("""
        s = torch.sparse_coo_tensor((2, 3), device="openreg", check_invariants=False)
        s.add_(torch.ones(2, 3, device="openreg").to_sparse())
        print(json.dumps({"device": str(s.device), "nnz": s._nnz(), "dense": s.to_dense().tolist()}))
    """)
    assert out == {"device": "openreg:0", "nnz": 6, "dense": [[1.0] * 3] * 2}


def test_a_nested_tensor_made_first():
    # torch.nested.nested_tensor copies its buffer to the device in C++, where Tensor.to's device guard loads the
    # glue alone; nested tensors' ops reach no fallback of libopenreg_lazy, so the glue's factory starts the layers.
    out = _fresh("""
        import warnings
        warnings.simplefilter("ignore")  # the strided nested API is a prototype
        parts = [torch.ones(2, 3), torch.ones(1, 3)]
        nt = torch.nested.nested_tensor(parts, device="openreg")
        cpu = torch.nested.nested_tensor(parts)
        print(json.dumps({"device": str(nt.device), "sin": nt.sin().to_padded_tensor(0).tolist(),
                          "cpu": cpu.sin().to_padded_tensor(0).tolist()}))
    """)
    assert out["device"] == "openreg:0" and out["sin"] == out["cpu"]


# Ops called through torch.ops skip torch's lazy initialisation: libopenreg_lazy loads the layers for the first
# one (a factory: its kernel there), and for the first after a C++ entry point loaded the glue alone (then the
# PrivateUse1 fallback). Each entry is a factory whose kernel is per backend (composites such as arange call them).
ENTRIES = {
    "arange": "torch.ops.aten.arange.start_step(0, 6, 1, dtype=torch.float32, device=device)",
    "empty_strided": "torch.ops.aten.empty_strided.default([2, 3], [1, 2], device=device).fill_(2).flatten()",
    "tril_indices": "torch.ops.aten.tril_indices.default(3, 3, device=device).flatten().float()",
    "zero tensor": "torch.ops.aten._efficientzerotensor.default([6], device=device) + 1",
}
OPS = """
    def ops(device):
        x = {entry}
        y = torch.ops.aten.full.default(x.shape, 0.5, device=device)
        return torch.ops.aten.addcmul.default(x, x, y, value=2).tolist()
    result = {{"openreg": ops("openreg"), "initialized": torch.openreg.is_initialized(), "cpu": ops("cpu")}}
    print(json.dumps(result))
"""
FIRSTS = {"nothing": "", "a stream": 'torch.Stream("openreg")', "an event": 'torch.Event(device="openreg")'}


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("first", FIRSTS)
def test_ops_called_through_torch_ops_first(first, entry):
    code = textwrap.dedent(OPS).format(entry=ENTRIES[entry])
    out = _fresh("\n".join([FIRSTS[first], 'assert "openreg_eager" not in sys.modules', code]))
    assert out["openreg"] == out["cpu"] and out["initialized"]


def test_every_factory_that_can_reach_the_device_first_has_a_kernel_that_starts_it():
    # Before the glue makes a tensor, an op reaches openreg only as a factory that torch's BackendSelect sends to
    # the device's own kernel (no composite one): libopenreg_lazy's list must hold the running torch's, unless
    # the PrivateUse1 fallback catches them all.
    out = _fresh("""
        C = torch._C
        composites = ["CompositeImplicitAutograd", "CompositeExplicitAutograd",
                      "CompositeExplicitAutogradNonFunctional"]
        factories = [n for n in C._dispatch_get_all_op_names()
                     if n.startswith("aten::") and C._dispatch_has_kernel_for_dispatch_key(n, "BackendSelect")
                     and not any(C._dispatch_has_kernel_for_dispatch_key(n, k) for k in composites)]
        fallback = C._dispatch_has_backend_fallback(C.DispatchKey.PrivateUse1)
        kernels = {n for n in factories if fallback
                   or any(C._dispatch_has_kernel_for_dispatch_key(n, k) for k in ("PrivateUse1", "SparsePrivateUse1"))}
        print(json.dumps({"factories": "aten::empty.memory_format" in factories,
                          "without": sorted(set(factories) - kernels), "loaded": "openreg_runtime" in sys.modules}))
    """)
    assert out == {"factories": True, "without": [], "loaded": False}


INITS = ["torch.openreg.init()", "torch.openreg._lazy_init()", "import openreg; openreg.init()"]


@pytest.mark.parametrize("init", INITS)
def test_init_starts_the_device(init):
    # `_initialized` is torch.cuda's flag, which torch.utils.checkpoint reads from any device module.
    out = _fresh(f"""
        before = torch.openreg._initialized
        assert "openreg_runtime" not in sys.modules
        {init}
        after = [torch.openreg.is_initialized(), torch.openreg._initialized]
        print(json.dumps({{"before": before, "initialized": after}}))
    """)
    assert out == {"before": False, "initialized": [True, True]}
