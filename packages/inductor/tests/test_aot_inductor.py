"""AOTInductor on openreg: `aoti_compile_and_package` of a model exported on openreg, then `aoti_load_package`
and runs on openreg inputs, compared with the same model run eagerly on the CPU."""

from __future__ import annotations

import time

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export.pt2_archive._package import load_pt2

from openreg_runtime.testing import run_python

TOL = dict(atol=1e-5, rtol=1e-5)


class Net(nn.Module):
    """Generated kernels and ATen calls through openreg's C shims (convolution, addmm, attention)."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.proj, self.head = nn.Linear(8, 16), nn.Linear(16, 5)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        t = self.proj(h.flatten(2).transpose(1, 2))
        a, _ = self.attn(t, t, t, need_weights=False)
        return self.head(F.layer_norm(a + t, (16,))).mean(1)


def inputs(batch: int) -> torch.Tensor:
    return torch.randn(batch, 3, 6, 6, generator=torch.Generator().manual_seed(batch))


@pytest.fixture(scope="module")
def cpu_model() -> Net:
    torch.manual_seed(0)
    model = Net().eval()
    with torch.no_grad():  # running statistics that are not the identity
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model


def export(cpu_model: Net) -> torch.export.ExportedProgram:
    model = Net().eval()
    model.load_state_dict(cpu_model.state_dict())
    batch = torch.export.Dim("batch", min=1, max=64)
    return torch.export.export(model.to("openreg"), (inputs(2).to("openreg"),), dynamic_shapes=({0: batch},))


@pytest.fixture(scope="module")
def package(cpu_model, tmp_path_factory) -> str:
    torch._dynamo.reset()
    path = tmp_path_factory.mktemp("aoti") / "net.pt2"
    return torch._inductor.aoti_compile_and_package(export(cpu_model), package_path=str(path))


def weight_bytes(model: nn.Module) -> int:
    return sum(t.nbytes for t in model.state_dict().values())


@pytest.mark.parametrize("how", ["device_index=1", "current device"])
def test_a_package_runs_on_the_device_it_is_loaded_on_and_matches_the_cpu(package, cpu_model, how):
    torch.openreg.synchronize()
    before = torch.openreg.memory_allocated(1)
    if how == "current device":
        with torch.openreg.device(1):
            model = torch._inductor.aoti_load_package(package)
    else:
        model = torch._inductor.aoti_load_package(package, device_index=1)
    assert torch.openreg.memory_allocated(1) - before >= weight_bytes(cpu_model)  # the weights live there
    for batch in (2, 5):  # the exported batch dimension is dynamic
        out = model(inputs(batch).to("openreg:1"))
        assert out.device == torch.device("openreg:1")
        with torch.no_grad():
            torch.testing.assert_close(out.cpu(), cpu_model(inputs(batch)), **TOL)
    assert torch.openreg.current_device() == 0


def test_a_loaded_model_returns_before_its_kernels_run(package, cpu_model):
    model = torch._inductor.aoti_load_package(package)
    x = inputs(4).to("openreg")
    model(x)
    torch.openreg.synchronize()
    torch.openreg._sleep(400_000_000)
    start = time.perf_counter()
    out = model(x)
    assert time.perf_counter() - start < 0.2
    with torch.no_grad():
        torch.testing.assert_close(out.cpu(), cpu_model(inputs(4)), **TOL)


def test_a_fresh_process_loads_a_package_before_it_uses_the_device(package, cpu_model, tmp_path):
    result = tmp_path / "out.pt"
    done = run_python(f"""
        import torch
        model = torch._inductor.aoti_load_package({package!r})  # nothing of openreg loaded before this
        x = torch.randn(3, 3, 6, 6, generator=torch.Generator().manual_seed(3))
        torch.save(model(x.to("openreg")).cpu(), {str(result)!r})
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    with torch.no_grad():
        torch.testing.assert_close(torch.load(result), cpu_model(inputs(3)), **TOL)


def test_loading_on_a_device_that_does_not_exist_is_a_clear_error(package):
    count = torch.openreg.device_count()
    with pytest.raises(RuntimeError, match=rf"openreg:{count}: there are {count} openreg devices"):
        torch._inductor.aoti_load_package(package, device_index=count)


def test_weights_packaged_outside_the_model_load_onto_the_device(cpu_model, tmp_path):
    torch._dynamo.reset()
    configs = {"aot_inductor.package_constants_in_so": False,
               "aot_inductor.package_constants_on_disk_format": "pickle_weights"}
    path = torch._inductor.aoti_compile_and_package(export(cpu_model), package_path=str(tmp_path / "net.pt2"),
                                                    inductor_configs=configs)
    model = load_pt2(path, load_weights_from_disk=True).aoti_runners["model"]
    out = model(inputs(2).to("openreg"))
    assert out.device == torch.device("openreg:0")
    with torch.no_grad():
        torch.testing.assert_close(out.cpu(), cpu_model(inputs(2)), **TOL)
