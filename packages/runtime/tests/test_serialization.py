"""torch.save / torch.load of openreg tensors, with and without map_location."""

import io

import pytest
import torch
from torch.testing import assert_close


def _round_trip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


@pytest.mark.parametrize("device", ["openreg:0", "openreg:1"])
def test_round_trip_keeps_device_and_data(device, two_devices):
    cpu = torch.randn(7, 3, dtype=torch.float64)
    loaded = _round_trip(cpu.to(device))
    assert loaded.device == torch.device(device)
    assert loaded.dtype == torch.float64
    assert_close(loaded.cpu(), cpu)


@pytest.mark.parametrize(
    "map_location, expected",
    [
        ("cpu", "cpu"),
        ("openreg:1", "openreg:1"),
        (torch.device("openreg:1"), "openreg:1"),
        ({"openreg:0": "openreg:1"}, "openreg:1"),
        (lambda storage, loc: storage, "cpu"),  # the usual "load on the host" idiom
        (lambda storage, loc: storage.openreg(1), "openreg:1"),
    ],
    ids=["cpu", "openreg:1", "device", "dict", "callable-cpu", "callable-openreg"],
)
def test_map_location(map_location, expected, two_devices):
    cpu = torch.arange(10, dtype=torch.int64).reshape(2, 5)
    loaded = _round_trip({"t": cpu.to("openreg:0")}, map_location=map_location)["t"]
    assert loaded.device == torch.device(expected)
    assert_close(loaded.cpu(), cpu)


def test_cpu_tensor_mapped_to_openreg(two_devices):
    cpu = torch.linspace(0, 1, 9)
    loaded = _round_trip(cpu, map_location="openreg:1")
    assert loaded.device == torch.device("openreg:1")
    assert_close(loaded.cpu(), cpu)


def test_views_keep_sharing_storage():
    base = torch.arange(12.0).to("openreg")
    obj = {"base": base, "row": base.view(3, 4)[1], "cols": base.view(3, 4)[:, 2]}
    loaded = _round_trip(obj)
    assert loaded["row"].untyped_storage().data_ptr() == loaded["base"].untyped_storage().data_ptr()
    assert loaded["cols"].stride() == (4,) and loaded["cols"].storage_offset() == 2
    for k in obj:
        assert_close(loaded[k].cpu(), obj[k].cpu(), msg=k)
    loaded["row"].fill_(-1.0)  # one storage after loading, as before saving
    expect = torch.arange(12.0)
    expect[4:8] = -1.0
    assert_close(loaded["base"].cpu(), expect)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool, torch.int64], ids=str)
def test_dtypes(dtype):
    cpu = (torch.randn(4, 4) * 10).to(dtype)
    assert_close(_round_trip(cpu.to("openreg")).cpu(), cpu)


def test_module_state_dict_round_trip(two_devices):
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3).openreg(1)
    sd = _round_trip(m.state_dict())
    ref = torch.nn.Linear(4, 3)
    ref.load_state_dict(_round_trip(m.state_dict(), map_location="cpu"))
    for k, v in sd.items():
        assert v.device == torch.device("openreg:1"), k
        assert_close(v.cpu(), ref.state_dict()[k], msg=k)
    fresh = torch.nn.Linear(4, 3).openreg()
    fresh.load_state_dict(sd)  # copies across devices into openreg:0 parameters
    for k, v in fresh.state_dict().items():
        assert v.device == torch.device("openreg:0")
        assert_close(v.cpu(), ref.state_dict()[k], msg=k)


def test_weights_only_load():
    cpu = torch.randn(3)
    loaded = _round_trip({"w": cpu.to("openreg")}, weights_only=True)
    assert loaded["w"].device == torch.device("openreg:0")
    assert_close(loaded["w"].cpu(), cpu)


def test_save_to_file(tmp_path, two_devices):
    cpu = torch.randn(5)
    path = tmp_path / "t.pt"
    torch.save(cpu.to("openreg:1"), path)
    assert_close(torch.load(path, map_location="cpu"), cpu)
    assert torch.load(path).device == torch.device("openreg:1")
