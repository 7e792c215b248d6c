"""Tensors on openreg: creation, copies, views, printing and the runtime-only
compute error, checked against the same operations on the CPU."""

import re

import pytest
import torch
from torch.testing import assert_close

DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 100).to(dtype)
    return torch.randint(-1000, 1000, shape, generator=g, dtype=dtype)


# --- creation ------------------------------------------------------------------


def test_empty_and_empty_strided_metadata(two_devices):
    e = torch.empty(2, 3, 4, device="openreg:1", dtype=torch.float64)
    assert e.device == torch.device("openreg:1")
    assert e.shape == (2, 3, 4) and e.dtype == torch.float64
    assert e.stride() == torch.empty(2, 3, 4).stride()
    assert e.is_contiguous()
    s = torch.empty_strided((3, 4), (1, 3), device="openreg")
    assert s.stride() == (1, 3) and s.shape == (3, 4)
    assert not s.is_contiguous()
    cl = torch.empty(2, 3, 4, 5, device="openreg", memory_format=torch.channels_last)
    assert cl.stride() == torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).stride()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_factories_match_cpu(dtype):
    shape = (3, 5)
    assert_close(torch.zeros(shape, dtype=dtype, device="openreg").cpu(), torch.zeros(shape, dtype=dtype))
    assert_close(torch.ones(shape, dtype=dtype, device="openreg").cpu(), torch.ones(shape, dtype=dtype))
    value = True if dtype == torch.bool else 3
    f = torch.full(shape, value, dtype=dtype, device="openreg")
    assert f.dtype == dtype
    assert_close(f.cpu(), torch.full(shape, value, dtype=dtype))
    z = torch.zeros_like(f)
    assert z.device == f.device
    assert_close(z.cpu(), torch.zeros(shape, dtype=dtype))


@pytest.fixture
def deterministic():
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


NEW_MEMORY = {
    "empty": lambda d, dt: torch.empty(2, 3, device=d, dtype=dt),
    "empty_like": lambda d, dt: torch.empty_like(torch.zeros(2, 3, device=d, dtype=dt)),
    "empty_strided": lambda d, dt: torch.empty_strided((2, 3), (1, 2), device=d, dtype=dt),
    "empty_permuted": lambda d, dt: torch.empty_permuted((2, 3), (1, 0), device=d, dtype=dt),
    # What resize_ adds to the storage; the elements it had keep their values.
    "resize_": lambda d, dt: torch.zeros(2, device=d, dtype=dt).resize_(7),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool, torch.complex64], ids=str)
@pytest.mark.parametrize("make", NEW_MEMORY)
def test_deterministic_mode_fills_new_memory_as_the_cpu(make, dtype, deterministic):
    """NaN for floating and complex dtypes, the largest value for the others, as on the CPU and CUDA."""
    want, got = NEW_MEMORY[make]("cpu", dtype), NEW_MEMORY[make]("openreg", dtype)
    assert_close(got.cpu(), want, equal_nan=True)


BITS_DTYPES = [torch.bits8, torch.bits16, torch.bits1x8, torch.bits2x4, torch.bits4x2, torch.float4_e2m1fn_x2]


@pytest.mark.parametrize("dtype", BITS_DTYPES, ids=str)
def test_zero_clears_dtypes_fill_has_no_kernel_for_and_fill_refuses_them_at_the_call(dtype):
    # PyTorch's test_torch.py::test_zero_dtypes_without_fill_kernel: CUDA's zero_ writes zero bytes over a dense
    # tensor of any dtype; the CPU's fill_ refuses these when it dispatches, before it looks at the tensor.
    width = torch.empty(0, dtype=dtype).element_size()
    raw = torch.arange(1, 1 + 64 * width, dtype=torch.uint8).to("openreg")
    raw.view(dtype).zero_()
    assert raw.cpu().count_nonzero().item() == 0
    for numel in (0, 4):
        with pytest.raises(NotImplementedError) as on_cpu:
            torch.empty(numel, dtype=dtype).fill_(0)
        with pytest.raises(NotImplementedError, match=re.escape(str(on_cpu.value))):
            torch.empty(numel, dtype=dtype, device="openreg").fill_(0)


def test_zero_of_a_tensor_with_gaps_or_overlaps_fills_it_as_the_cpu():
    for make in (lambda d: torch.ones(6, 8, device=d)[:, ::2], lambda d: torch.ones(8, device=d).expand(3, 8),
                 lambda d: torch.ones(6, 8, device=d).t()):
        base = make("openreg")
        base.zero_()
        assert_close(base.cpu(), make("cpu").zero_(), rtol=0, atol=0)


def test_full_float_value():
    assert_close(torch.full((4,), -2.5, device="openreg").cpu(), torch.full((4,), -2.5))
    assert_close(
        torch.full((4,), 1e-3, dtype=torch.float64, device="openreg").cpu(), torch.full((4,), 1e-3, dtype=torch.float64)
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip(dtype, two_devices):
    cpu = sample((17, 9), dtype)
    d = cpu.to("openreg")
    assert d.device == torch.device("openreg:0") and d.dtype == dtype
    assert_close(d.cpu(), cpu)
    assert_close(torch.tensor(cpu.tolist(), dtype=dtype, device="openreg:1").cpu(), cpu)


# --- copies --------------------------------------------------------------------


def test_copy_between_devices(two_devices):
    cpu = sample((64, 33), torch.float32)
    a = cpu.to("openreg:0")
    b = a.to("openreg:1")
    assert b.device == torch.device("openreg:1")
    assert_close(b.cpu(), cpu)
    c = torch.zeros(64, 33, device="openreg:0")
    c.copy_(b)
    assert_close(c.cpu(), cpu)
    # same-device copy
    d = torch.empty_like(a)
    d.copy_(a)
    assert_close(d.cpu(), cpu)


@pytest.mark.parametrize("non_blocking", [False, True])
def test_strided_sources_and_destinations(non_blocking, two_devices):
    base = sample((6, 8), torch.float32)
    views = {
        "transpose": lambda t: t.t(),
        "step": lambda t: t[::2, 1::3],
        "offset": lambda t: t[2:, 3:],
    }
    for name, view in views.items():
        expect = view(base)
        # cpu (non-contiguous) -> openreg
        d = torch.empty(expect.shape, device="openreg")
        d.copy_(expect, non_blocking=non_blocking)
        assert_close(d.cpu(), expect, msg=name)
        # openreg (non-contiguous) -> cpu
        src = view(base.to("openreg"))
        assert not src.is_contiguous()
        host = torch.empty(expect.shape)
        host.copy_(src, non_blocking=non_blocking)
        torch.openreg.synchronize()
        assert_close(host, expect, msg=name)
        # openreg -> non-contiguous cpu destination
        host_big = torch.zeros(6, 8)
        view(host_big).copy_(src, non_blocking=non_blocking)
        torch.openreg.synchronize()
        ref = torch.zeros(6, 8)
        view(ref).copy_(expect)
        assert_close(host_big, ref, msg=name)
        # cpu -> non-contiguous openreg destination
        dev_big = torch.zeros(6, 8, device="openreg")
        view(dev_big).copy_(expect, non_blocking=non_blocking)
        assert_close(dev_big.cpu(), ref, msg=name)
        # openreg:0 (strided) -> openreg:1 (strided)
        dev1 = torch.zeros(6, 8, device="openreg:1")
        view(dev1).copy_(src, non_blocking=non_blocking)
        assert_close(dev1.cpu(), ref, msg=name)


@pytest.mark.parametrize(
    "src_dtype, dst_dtype",
    [
        (torch.float32, torch.float64),
        (torch.float64, torch.int64),
        (torch.int64, torch.float32),
        (torch.float32, torch.bfloat16),
        (torch.bool, torch.float32),
        (torch.float32, torch.bool),
    ],
    ids=str,
)
def test_dtype_converting_copies(src_dtype, dst_dtype, two_devices):
    cpu = sample((5, 7), src_dtype)
    expect = cpu.to(dst_dtype)
    # host -> device, converting
    d = torch.empty(5, 7, dtype=dst_dtype, device="openreg")
    d.copy_(cpu)
    assert_close(d.cpu(), expect)
    # device -> device (same device, .to(dtype)), converting
    d2 = cpu.to("openreg").to(dst_dtype)
    assert d2.dtype == dst_dtype and d2.device.type == "openreg"
    assert_close(d2.cpu(), expect)
    # device -> host, converting
    h = torch.empty(5, 7, dtype=dst_dtype)
    h.copy_(cpu.to("openreg"))
    assert_close(h, expect)
    # device -> other device, converting
    assert_close(cpu.to("openreg:0").to("openreg:1", dtype=dst_dtype).cpu(), expect)


def test_broadcasting_copy_matches_cpu():
    row = torch.arange(4.0)
    expect = torch.empty(3, 4).copy_(row)
    d = torch.empty(3, 4, device="openreg").copy_(row)
    assert_close(d.cpu(), expect)


@pytest.mark.parametrize(("dst", "src"), [((3, 4), (5,)), ((2, 3), (3, 3)), ((2, 1), (2, 3)), ((3,), (0,)),
                                          ((1, 3), (1, 1, 3))])
@pytest.mark.parametrize("devices", [("openreg", "openreg"), ("openreg", "cpu"), ("cpu", "openreg")])
def test_copy_shape_mismatch_raises_the_cpus_error(dst, src, devices):
    """TensorIterator's sentences: the destination broadcast with the source, which it may not resize."""
    with pytest.raises(RuntimeError) as on_cpu:
        torch.empty(dst).copy_(torch.ones(src))
    with pytest.raises(RuntimeError) as on_openreg:
        torch.empty(dst, device=devices[0]).copy_(torch.ones(src, device=devices[1]))
    assert str(on_openreg.value) == str(on_cpu.value)


@pytest.mark.parametrize("where", ["openreg:0", "openreg:1"])
def test_unbroadcastable_device_copy_raises_at_the_call(where, two_devices):
    # Same number of elements, incompatible shapes: the CPU refuses at once.
    with pytest.raises(RuntimeError):
        torch.empty(3, 4).copy_(torch.ones(2, 6))
    dst = torch.zeros(3, 4, device=where)
    src = torch.ones(2, 6, device="openreg:0")
    try:
        with pytest.raises(RuntimeError):
            dst.copy_(src)
    finally:
        # Whatever happened, no error may be left to surprise a later, unrelated call.
        leftover = None
        try:
            torch.openreg.synchronize(0)
            torch.openreg.synchronize(1)
        except RuntimeError as e:
            leftover = str(e)
    assert leftover is None, f"the bad copy was reported later, at an unrelated synchronize: {leftover}"


@pytest.mark.parametrize(
    ("src_dtype", "dst_dtype"),
    [(torch.bits16, torch.int16), (torch.float32, torch.uint3), (torch.uint3, torch.float32),
     (torch.complex64, torch.uint3)],
    ids=str,
)
@pytest.mark.parametrize("route", ["openreg", "openreg to openreg:1", "host to openreg", "openreg to host"])
def test_a_conversion_the_cpu_refuses_raises_at_the_call_as_on_the_cpu(src_dtype, dst_dtype, route, two_devices):
    src_device, dst_device = {"openreg": ("openreg", "openreg"), "openreg to openreg:1": ("openreg", "openreg:1"),
                              "host to openreg": ("cpu", "openreg"), "openreg to host": ("openreg", "cpu")}[route]
    with pytest.raises(NotImplementedError) as on_cpu:
        torch.empty(4, dtype=dst_dtype).copy_(torch.empty(4, dtype=src_dtype))
    dst = torch.empty(4, dtype=dst_dtype, device=dst_device)
    with pytest.raises(NotImplementedError, match=f"^{re.escape(str(on_cpu.value))}$"):
        dst.copy_(torch.empty(4, dtype=src_dtype, device=src_device))
    torch.openreg.synchronize(0)  # nothing left to fail later
    torch.openreg.synchronize(1)


def test_pageable_source_can_be_reused_immediately():
    src = torch.arange(1000.0)
    expect = src.clone()
    d = src.to("openreg", non_blocking=True)
    src.fill_(-1)
    assert_close(d.cpu(), expect)


# --- scalars and lists -----------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_item_and_tolist(dtype):
    cpu = sample((3, 4), dtype)
    d = cpu.to("openreg:1")
    assert d.tolist() == cpu.tolist()
    assert d[1, 2].item() == cpu[1, 2].item()
    assert type(d[0, 0].item()) is type(cpu[0, 0].item())
    scalar = sample((), dtype)
    assert scalar.to("openreg").item() == scalar.item()
    assert scalar.to("openreg").tolist() == scalar.tolist()


ITEM_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32,
               torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex32,
               torch.complex64, torch.complex128, torch.bool, torch.float8_e5m2, torch.float8_e4m3fn,
               torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]


@pytest.mark.parametrize("dtype", ITEM_DTYPES, ids=str)
def test_item_reads_every_dtype_as_the_cpu_does(dtype):
    """.item() reads device memory in place: the same Python value and type as the CPU's, in every dtype it reads
    (an element at an offset into its storage, so the read starts where the element is)."""
    cpu = torch.tensor([0.0, -2.5, 3.0, 1.0]).to(dtype) if dtype != torch.bool else torch.tensor([False, True])
    d = cpu.to("openreg")
    for i in range(len(cpu)):
        got, want = d[i].item(), cpu[i].item()
        assert (got, type(got)) == (want, type(want))


def test_item_of_a_lazy_conjugate_or_negative_view_resolves_it():
    cpu = torch.tensor([1 + 2j, -3 - 4j], dtype=torch.complex64)
    d = cpu.to("openreg")
    assert d.conj()[1].item() == cpu.conj()[1].item() == -3 + 4j
    # A negative view made directly: .imag of a conjugate would need view_as_real, an eager kernel.
    real = torch.tensor([2.5, -1.0])
    assert torch._neg_view(real.to("openreg"))[0].item() == torch._neg_view(real)[0].item() == -2.5


@pytest.mark.parametrize(
    "read",
    [torch.Tensor.item, torch.ops.aten._local_scalar_dense],
    ids=["item", "_local_scalar_dense"],
)
@pytest.mark.parametrize("make", [lambda: torch.ones(0), lambda: torch.ones(2), lambda: torch.arange(6.0)[3::2]])
def test_reading_a_scalar_of_other_than_one_element_as_the_cpu(read, make):
    """`.item()` refuses every count but one; `_local_scalar_dense` under it reads the first element (of CUDA's too)
    and refuses only an empty tensor."""
    try:
        expected = read(make())
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=f"^{re.escape(str(e))}$"):
            read(make().to("openreg"))
    else:
        assert read(make().to("openreg")) == expected


def test_item_sees_queued_writes():
    d = torch.zeros((), device="openreg")
    torch.openreg._sleep(100_000_000)
    d.fill_(5.0)
    assert d.item() == 5.0


# --- views and metadata -------------------------------------------------------


def test_views_match_cpu():
    cpu = sample((4, 6), torch.float32)
    d = cpu.to("openreg")
    cases = {
        "view": lambda t: t.view(3, 8),
        "view -1": lambda t: t.view(-1),
        "reshape": lambda t: t.reshape(2, 12),
        "slice": lambda t: t[1:3, ::2],
        "select": lambda t: t[2],
        "narrow": lambda t: t.narrow(1, 2, 3),
        "unsqueeze": lambda t: t.unsqueeze(0),
        "permute": lambda t: t.permute(1, 0),
        "expand": lambda t: t[:1].expand(5, 6),
        "as_strided": lambda t: t.as_strided((3, 3), (5, 2), 1),
        "diagonal": lambda t: t.diagonal(),
        "flatten": lambda t: t.flatten(),
        "unflatten": lambda t: t.unflatten(1, (2, 3)),
    }
    for name, f in cases.items():
        got, expect = f(d), f(cpu)
        assert got.shape == expect.shape, name
        assert got.stride() == expect.stride(), name
        assert got.storage_offset() == expect.storage_offset(), name
        assert got.untyped_storage().data_ptr() == d.untyped_storage().data_ptr(), name  # a view, no copy
        assert_close(got.cpu(), expect, msg=name)


def test_transpose_contiguous_copy_back():
    cpu = sample((5, 7), torch.float32)
    d = cpu.to("openreg")
    t = d.t()
    assert not t.is_contiguous()
    c = t.contiguous()
    assert c.is_contiguous()
    assert c.data_ptr() != d.data_ptr()
    assert_close(c.cpu(), cpu.t().contiguous())
    assert_close(d.t().reshape(35).cpu(), cpu.t().reshape(35))  # reshape that must copy
    assert_close(d.t().clone().cpu(), cpu.t().clone())


def test_writes_through_views():
    cpu = torch.zeros(4, 5)
    d = cpu.to("openreg")
    for t in (cpu, d):
        t[1].fill_(3.0)
        t[:, 2].fill_(-1.0)
        t.view(-1)[17:19].zero_()
        t[3, 1::2] = 7.0
    assert_close(d.cpu(), cpu)


def test_resize_growing_keeps_data():
    cpu = torch.arange(6.0)
    d = cpu.to("openreg")
    d.resize_(4, 5)
    assert d.shape == (4, 5)
    assert_close(d.view(-1)[:6].cpu(), cpu)
    d.resize_(2)
    assert_close(d.cpu(), cpu[:2])
    d.resize_(10000)
    assert_close(d[:6].cpu(), cpu)


RESIZES = {
    "same sizes, every other element": lambda d: torch.zeros(6, device=d)[::2].resize_(3),
    "same sizes, transposed": lambda d: torch.zeros(2, 3, device=d).t().resize_(3, 2),
    "same sizes, channels_last asked": lambda d: torch.zeros(1, 2, 2, 2, device=d).resize_(
        1, 2, 2, 2, memory_format=torch.channels_last),
    "other sizes, transposed": lambda d: torch.zeros(2, 3, device=d).t().resize_(2, 3),
    "no elements past an offset": lambda d: torch.zeros(4, device=d)[3:].resize_(0),
    "preserve_format": lambda d: torch.zeros(2, device=d).resize_(2, memory_format=torch.preserve_format),
    "a negative size": lambda d: torch.zeros(2, device=d).resize_(-1),
}


@pytest.mark.parametrize("case", RESIZES)
def test_resize_gives_the_cpus_layout_and_errors(case):
    def outcome(d):
        try:
            t = RESIZES[case](d)
        except RuntimeError as e:
            return type(e), str(e).split("\n")[0]
        return t.shape, t.stride(), t.storage_offset(), t.untyped_storage().nbytes()

    assert outcome("openreg") == outcome("cpu")


@pytest.mark.parametrize("factory", ["ones", "zeros"])
def test_a_factorys_out_view_is_written_where_the_cpu_writes(factory):
    def written(d):
        base = torch.full((6,), -1.0, device=d)
        getattr(torch, factory)(3, out=base[::2])
        return base.cpu()

    assert_close(written("openreg"), written("cpu"))


def test_resize_is_ordered_after_queued_writes():
    d = torch.zeros(1000, device="openreg")
    torch.openreg.synchronize()
    torch.openreg._sleep(200_000_000)
    d.fill_(3.0)
    d.resize_(100_000)
    assert_close(d[:1000].cpu(), torch.full((1000,), 3.0))


def test_set_shares_storage():
    src = torch.arange(12.0).to("openreg")
    t = torch.empty(0, device="openreg")
    t.set_(src)
    assert t.data_ptr() == src.data_ptr()
    assert_close(t.cpu(), torch.arange(12.0))
    u = torch.empty(0, device="openreg").set_(src.untyped_storage(), 2, (2, 3), (3, 1))
    assert_close(u.cpu(), torch.arange(12.0).as_strided((2, 3), (3, 1), 2))
    u.fill_(0.5)  # writes into src's memory
    expect = torch.arange(12.0)
    expect.as_strided((2, 3), (3, 1), 2).fill_(0.5)
    assert_close(src.cpu(), expect)
    e = torch.ones(3, device="openreg").set_()
    assert e.shape == (0,) and e.device.type == "openreg"


def test_set_without_a_source_keeps_the_tensors_device(two_devices):
    """set_() gives the tensor an empty storage on its own device, whichever is current, as CUDA's kernel (run under
    the tensor's device guard) does; openreg's made it on the current device and refused the mismatch."""
    t = torch.ones(2, 3, device=two_devices[1])
    assert torch.openreg.current_device() == 0
    t.set_()
    assert t.shape == (0,) and t.device == t.untyped_storage().device == two_devices[1]


def test_storage_clone_and_copy():
    d = torch.arange(8.0).to("openreg")
    s = d.untyped_storage().clone()
    assert s.device == d.device and s.data_ptr() != d.untyped_storage().data_ptr()
    assert s.cpu().tolist() == torch.arange(8.0).untyped_storage().tolist()


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
@pytest.mark.parametrize("dtype", [*DTYPES, torch.complex64, torch.int8])
def test_legacy_storage_types_are_openregs_as_cudas_are_cudas(dtype):
    """tensor.storage_type() names torch.openreg's class of the CPU's name (None would break code that
    dispatches on it); the class checks a storage's device and dtype, and makes openreg storages."""
    cpu = torch.zeros(3, dtype=dtype)
    storage_type = cpu.to("openreg").storage_type()
    assert storage_type is getattr(torch.openreg, cpu.storage_type().__name__)
    assert isinstance(cpu.to("openreg").storage(), storage_type)
    assert not isinstance(cpu.storage(), storage_type)
    assert storage_type.dtype == dtype
    made = storage_type(4)
    assert (made.device.type, made.dtype, made.size()) == ("openreg", dtype, 4)
    assert torch.is_storage(made)


# --- printing ------------------------------------------------------------------


def _strip_device(text):
    return re.sub(r"\s+", " ", re.sub(r",\s*device='openreg:\d+'", "", text))


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.tensor([1.0, 2.5, -3.0]),
        lambda: torch.tensor(3.25),
        lambda: torch.arange(12, dtype=torch.int64).reshape(3, 4),
        lambda: torch.tensor([True, False, True]),
        lambda: torch.tensor([1.5, -2.25], dtype=torch.bfloat16),
        lambda: torch.tensor([1.0, float("inf"), float("nan"), -float("inf"), 1e-8], dtype=torch.float64),
        lambda: torch.tensor([1e10, 1.0, 3e-5]),
        lambda: torch.empty(0, 3),
        lambda: sample((50, 60), torch.float32),  # summarised
        lambda: sample((2000,), torch.int64),  # summarised
        lambda: sample((3, 400, 3), torch.bool),
    ],
    ids=["float", "0-dim", "int64", "bool", "bf16", "nonfinite", "sci", "empty", "summary2d", "summary1d", "bool3d"],
)
def test_repr_matches_cpu(make):
    cpu = make()
    d = cpu.to("openreg")
    text = repr(d)
    assert "device='openreg:0'" in text
    assert _strip_device(text) == _strip_device(repr(cpu))
    assert _strip_device(str(d)) == _strip_device(str(cpu))


def test_repr_of_other_device(two_devices):
    assert "device='openreg:1'" in repr(torch.ones(2, device="openreg:1"))


# --- runtime-only errors ---------------------------------------------------------


def test_compute_needs_openreg_eager(run_python):
    # In a fresh interpreter that imports the runtime alone: once openreg-eager
    # is imported (as other test packages do), the device computes.
    proc = run_python(
        """
        import torch, openreg_runtime
        x = torch.ones(2, 2, device="openreg")
        for name, op in [("add", lambda: x + 1), ("mul", lambda: x * x), ("sum", lambda: x.sum()),
                         ("matmul", lambda: torch.matmul(x, x)), ("exp", lambda: x.exp())]:
            try:
                op()
            except NotImplementedError as e:
                assert "pip install openreg" in str(e), (name, str(e))
            else:
                raise SystemExit(f"{name} computed without openreg-eager")
        print(x)  # printing still works with the runtime alone
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "device='openreg:0'" in proc.stdout


@pytest.mark.parametrize(("target", "source"), [("cpu", "openreg:0"), ("openreg:0", "openreg:1"),
                                                ("openreg:0", "cpu"), ("openreg:0", "openreg:0")])
def test_fill_with_a_value_tensor_on_any_device_as_atens_fill(two_devices, target, source):
    """ATen's fill_ (the CPU's and CUDA's) reads a 0-dim value on another device; CUDA fills a CPU tensor with a
    device value, or one device's tensor with another's."""
    t = torch.zeros(4, dtype=torch.float64, device=target).fill_(torch.tensor(2.5, device=source))
    assert t.device == torch.device(target)
    assert_close(t.cpu(), torch.full((4,), 2.5, dtype=torch.float64), rtol=0, atol=0)


def test_fill_with_a_value_of_more_dimensions_raises_the_cpus_error():
    def message(device):
        with pytest.raises(RuntimeError) as info:
            torch.zeros(3, device=device).fill_(torch.ones(2, device=device))
        return str(info.value)

    assert message("openreg") == message("cpu")
