"""Execution semantics of openreg's eager kernels, checked against the CPU.

Asynchronous execution on the current stream, data-dependent ops, the
multi-device rules CUDA users rely on, views, in-place and out= ops,
non-contiguous inputs, dtype promotion, and asynchronous errors.
"""

from __future__ import annotations

import time
import warnings

import pytest
import torch
from torch.testing import assert_close

import openreg_eager  # noqa: F401  (registers the openreg kernels)
from openreg_runtime.testing import run_python

D0 = torch.device("openreg:0")
D1 = torch.device("openreg:1")


def _cpu_randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


# --------------------------------------------------------------------------- asynchronous execution


def test_elementwise_op_is_asynchronous():
    x_cpu = _cpu_randn(1000)
    x = x_cpu.to(D0)
    (x * 2).add_(1)  # warm up: shapes and out= overloads are looked up on first use
    torch.openreg.synchronize()

    torch.openreg._sleep(200_000_000)
    start = time.perf_counter()
    y = x * 2
    elapsed = time.perf_counter() - start
    done = torch.openreg.Event()
    done.record()
    assert elapsed < 0.1, f"x * 2 blocked for {elapsed:.3f}s behind a 200 ms device task: it should only queue work"
    assert not done.query(), "an event recorded after the queued op completed while the stream was still busy"
    assert y.device == D0 and y.shape == x.shape

    torch.openreg.synchronize()
    assert done.query()
    assert_close(y.cpu(), x_cpu * 2)


def test_host_read_waits_for_queued_work():
    x_cpu = _cpu_randn(64)
    x = x_cpu.to(D0)
    torch.exp(x) + x  # known signatures are queued (a first call runs at the call)
    torch.openreg.synchronize()
    torch.openreg._sleep(150_000_000)
    y = torch.exp(x) + x
    start = time.perf_counter()
    got = y.cpu()
    assert time.perf_counter() - start >= 0.1, ".cpu() returned before the queued work could have finished"
    assert_close(got, torch.exp(x_cpu) + x_cpu)


def test_ops_run_on_the_current_stream():
    x_cpu = _cpu_randn(256)
    x = x_cpu.to(D0)
    x.sin()  # known signatures are queued (a first call runs at the call)
    torch.openreg.synchronize()
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        torch.openreg._sleep(200_000_000)
        y = x.sin()
    # The default stream is idle: only the side stream holds the queued work.
    assert torch.openreg.default_stream().query()
    assert not side.query()
    side.synchronize()
    assert_close(y.cpu(), x_cpu.sin())


def test_work_is_stream_ordered():
    """A chain of dependent in-place ops queued behind a sleep produces the CPU result."""
    x_cpu = _cpu_randn(100)
    x = x_cpu.to(D0)
    torch.openreg._sleep(50_000_000)
    y = x.clone()
    ref = x_cpu.clone()
    for i in range(20):
        y.mul_(1.01).add_(i)
        ref.mul_(1.01).add_(i)
    assert_close(y.cpu(), ref)


# --------------------------------------------------------------------------- data-dependent ops


def _queued(x_cpu):
    """x_cpu on openreg, produced by a kernel queued behind device work, so ops reading it must wait."""
    x = x_cpu.to(D0)
    torch.openreg._sleep(50_000_000)
    return x * 1


def test_nonzero():
    x_cpu = (_cpu_randn(7, 9) > 0.3).float() * _cpu_randn(7, 9, seed=1)
    x = _queued(x_cpu)
    got = torch.nonzero(x)
    assert got.device == D0 and got.dtype == torch.int64
    assert_close(got.cpu(), torch.nonzero(x_cpu))
    assert_close(torch.nonzero(x, as_tuple=True)[1].cpu(), torch.nonzero(x_cpu, as_tuple=True)[1])
    assert_close(torch.argwhere(x).cpu(), torch.argwhere(x_cpu))


def test_masked_select_and_boolean_indexing():
    x_cpu = _cpu_randn(6, 5)
    x = _queued(x_cpu)
    assert_close(torch.masked_select(x, x > 0).cpu(), torch.masked_select(x_cpu, x_cpu > 0))
    got = x[x > 0]
    assert got.device == D0
    assert_close(got.cpu(), x_cpu[x_cpu > 0])
    # Row mask
    rows = torch.tensor([True, False, True, True, False, False])
    assert_close(x[rows.to(D0)].cpu(), x_cpu[rows])


def test_boolean_index_put():
    x_cpu = _cpu_randn(5, 5)
    x = _queued(x_cpu)
    x[x < 0] = 0.0
    x_cpu[x_cpu < 0] = 0.0
    assert_close(x.cpu(), x_cpu)


def test_unique():
    x_cpu = torch.tensor([3, 1, 2, 3, 3, 7, 1, 0, 2])
    x = _queued(x_cpu)
    got = torch.unique(x, sorted=True, return_inverse=True, return_counts=True)
    ref = torch.unique(x_cpu, sorted=True, return_inverse=True, return_counts=True)
    for g, r in zip(got, ref, strict=False):
        assert g.device == D0
        assert_close(g.cpu(), r)
    assert_close(torch.unique_consecutive(x).cpu(), torch.unique_consecutive(x_cpu))
    m_cpu = torch.tensor([[1, 2], [1, 2], [0, 1]])
    assert_close(torch.unique(m_cpu.to(D0), dim=0).cpu(), torch.unique(m_cpu, dim=0))


def test_item_and_tolist_see_queued_results():
    x_cpu = _cpu_randn(10)
    x = _queued(x_cpu)
    s = x.sum()
    assert s.item() == pytest.approx(x_cpu.sum().item(), rel=1e-5, abs=1e-5)
    assert x.tolist() == pytest.approx(x_cpu.tolist())
    assert bool((x > 100).any()) is False


# A host thread that waits for its stream runs the queued kernels itself (the worker idle): reads after queued
# work see it run in order. That those kernels stay outside the caller's autocast is
# test_eager_fidelity.py::test_cpu_autocast_leaves_openreg_ops_alone.


def test_reading_elements_one_at_a_time_after_queued_work_matches_cpu():
    x_cpu = _cpu_randn(300)
    x = x_cpu.to(D0)
    for step in range(50):
        x_cpu = x_cpu * 0.5 + step
        x = x * 0.5 + step
        assert x[step].item() == x_cpu[step].item()
    assert [x[i].item() for i in range(x.numel())] == x_cpu.tolist()


def _ops_seen(device):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    seen = []
    x = _cpu_randn(64).to(device)
    with Log():
        y = (x * 2 + 1).abs()
        (y >= 0).all().item()
        y.sum().tolist()
        y.cpu()
    return seen


def test_a_dispatch_mode_sees_the_same_ops_on_openreg_as_on_cpu():
    """Reads included, openreg dispatches nothing of its own. (A mode never sees the CPU kernels openreg runs:
    they run inside openreg's kernel, while the dispatcher has taken the mode off the stack.)"""
    cpu = [op for op in _ops_seen("cpu") if op != "aten._to_copy.default"]
    openreg = _ops_seen(D0)
    assert openreg.count("aten._to_copy.default") == 2  # tolist() and cpu() copy to the host, as on CUDA
    assert [op for op in openreg if op != "aten._to_copy.default"] == cpu



# --------------------------------------------------------------------------- devices


def test_mixing_two_openreg_devices_raises():
    a = torch.ones(3, device=D0)
    b = torch.ones(3, device=D1)
    with pytest.raises(RuntimeError) as info:
        a + b
    msg = str(info.value)
    assert "openreg:0" in msg and "openreg:1" in msg, msg
    with pytest.raises(RuntimeError, match="openreg:0"):
        torch.mm(a.view(3, 1), b.view(1, 3))


def test_mixing_openreg_and_cpu_tensor_raises():
    a = torch.ones(3, device=D0)
    with pytest.raises(RuntimeError, match="cpu"):
        a + torch.ones(3)
    with pytest.raises(RuntimeError, match="cpu"):
        torch.ones(3) * a
    with pytest.raises(RuntimeError):
        torch.matmul(torch.ones(2, 3, device=D0), torch.ones(3, 2))


def _in_place(op, *args, **kwargs):
    op(*args, **kwargs)
    return args[0]


FOREACH_SPANNING = {  # each gives the list it computed
    "add": lambda a, b: torch._foreach_add(a, b, alpha=0.5),
    "sub_": lambda a, b: _in_place(torch._foreach_sub_, a, b),
    "mul_scalar_": lambda a, b: _in_place(torch._foreach_mul_, a, 3.0),
    "add_scalars_": lambda a, b: _in_place(torch._foreach_add_, a, [1.0, 2.0, 3.0]),
    "half_add_": lambda a, b: _in_place(torch._foreach_add_, [t.half() for t in a], [t.half() for t in b], alpha=0.3),
    "addcmul_": lambda a, b: _in_place(torch._foreach_addcmul_, a, a, b, torch.tensor([1.0, 2.0, 3.0])),
    "div": lambda a, b: torch._foreach_div(a, b),
    "norm": lambda a, b: torch._foreach_norm(a),
}


@pytest.mark.parametrize("call", FOREACH_SPANNING.values(), ids=FOREACH_SPANNING.keys())
def test_foreach_lists_may_span_devices(call):
    """A foreach op's lists may hold tensors of both devices, each index's on one, as CUDA takes them (its
    per-tensor path); openreg refused the ones it runs as one kernel (add, sub, mul_ by a scalar).
    Each tensor stays on its device and gets the CPU's values."""
    cpu = [torch.arange(1.0, 4.0), torch.arange(2.0, 5.0), torch.tensor([5.0, -1.0])]
    devices = [D0, D1, D0]
    a = [t.to(d) for t, d in zip(cpu, devices, strict=True)]
    got, want = call(a, [t * 2 for t in a]), call([t.clone() for t in cpu], [t * 2 for t in cpu])
    assert [t.device for t in got] == devices
    for g, w in zip(got, want, strict=True):
        assert_close(g.cpu(), w)


def test_cpu_scalar_tensor_works():
    x_cpu = _cpu_randn(4)
    x = x_cpu.to(D0)
    got = x + torch.tensor(2.0)
    assert got.device == D0
    assert_close(got.cpu(), x_cpu + 2.0)
    got = torch.tensor(3.0) * x
    assert got.device == D0
    assert_close(got.cpu(), 3.0 * x_cpu)
    got = torch.where(x > 0, x, torch.tensor(0.0))
    assert_close(got.cpu(), torch.where(x_cpu > 0, x_cpu, torch.tensor(0.0)))


def test_indexing_with_cpu_index_tensors():
    x_cpu = _cpu_randn(5, 4)
    x = x_cpu.to(D0)
    idx = torch.tensor([4, 0, 2, 2])
    got = x[idx]
    assert got.device == D0
    assert_close(got.cpu(), x_cpu[idx])
    assert_close(x[idx, torch.tensor([0, 1, 3, 3])].cpu(), x_cpu[idx, torch.tensor([0, 1, 3, 3])])
    assert_close(x[:, torch.tensor([3, 1])].cpu(), x_cpu[:, torch.tensor([3, 1])])
    mask = torch.tensor([True, False, True, False, True])
    assert_close(x[mask].cpu(), x_cpu[mask])
    x[torch.tensor([1, 3])] = 7.0
    x_cpu[torch.tensor([1, 3])] = 7.0
    assert_close(x.cpu(), x_cpu)


def _read_scalar(x):
    scalar = torch.tensor(2.0)
    y = x + scalar
    return y, lambda: scalar.fill_(100.0), torch.arange(6.0) + 2.0


def _read_index(x):
    idx = torch.tensor([0, 1, 5])
    y = x[idx]
    return y, lambda: idx.fill_(3), torch.tensor([0.0, 1.0, 5.0])


def _read_put_index(x):
    idx = torch.tensor([1, 2])
    y = x.clone()
    y[idx] = -1.0
    return y, lambda: idx.fill_(0), torch.tensor([0.0, -1.0, -1.0, 3.0, 4.0, 5.0])


def _read_copy_source(x):
    src = torch.ones(6)
    y = torch.zeros(6, device=x.device)
    y.copy_(src)
    return y, lambda: src.fill_(5.0), torch.ones(6)


@pytest.mark.parametrize("case", [_read_scalar, _read_index, _read_put_index, _read_copy_source],
                         ids=["scalar_tensor", "index", "index_put", "copy_source"])
def test_cpu_inputs_are_read_at_the_call(case):
    """CPU tensors an op accepts (0-dim scalars, index tensors, copy sources) are read when
    the op is called, as on CUDA, not when the queued kernel eventually runs: changing them
    right after the call must not change the result."""
    x = torch.arange(6.0).to(D0)
    case(x)[0].cpu()  # warm up (first calls may take slower, synchronous paths)
    torch.openreg.synchronize()
    torch.openreg._sleep(100_000_000)
    y, mutate, expected = case(x)
    mutate()
    assert_close(y.cpu(), expected)


def test_ops_on_second_device_stay_there():
    assert torch.openreg.current_device() == 0
    a_cpu, b_cpu = _cpu_randn(4, 4), _cpu_randn(4, 4, seed=1)
    a, b = a_cpu.to(D1), b_cpu.to(D1)
    results = {
        "add": (a + b, a_cpu + b_cpu),
        "mm": (a @ b, a_cpu @ b_cpu),
        "sum": (a.sum(dim=0), a_cpu.sum(dim=0)),
        "relu": (torch.relu(a), torch.relu(a_cpu)),
        "cat": (torch.cat([a, b]), torch.cat([a_cpu, b_cpu])),
        "nonzero": (torch.nonzero(a > 0), torch.nonzero(a_cpu > 0)),
        "zeros_like": (torch.zeros_like(a), torch.zeros_like(a_cpu)),
    }
    for name, (got, ref) in results.items():
        assert got.device == D1, f"{name} produced a tensor on {got.device}"
        assert_close(got.cpu(), ref, msg=lambda m, n=name: f"{n}: {m}")
    assert torch.openreg.current_device() == 0


def test_second_device_work_is_queued_on_its_own_stream():
    a_cpu = _cpu_randn(100)
    a = a_cpu.to(D1)
    a * 3  # known signatures are queued (a first call runs at the call)
    torch.openreg.synchronize(1)
    with torch.openreg.device(1):
        torch.openreg._sleep(200_000_000)
    y = a * 3  # current device is 0; the op runs on device 1 behind the sleep
    assert torch.openreg.default_stream(0).query()
    assert not torch.openreg.default_stream(1).query()
    assert_close(y.cpu(), a_cpu * 3)


def test_factories_follow_current_device():
    with torch.openreg.device(1):
        t = torch.ones(3, device="openreg")
        assert t.device == D1
        u = torch.arange(5, device="openreg")
        assert u.device == D1
    assert_close(t.cpu(), torch.ones(3))
    assert_close(u.cpu(), torch.arange(5))
    assert torch.zeros(2, device="openreg").device == D0


PINNED_FACTORIES = {
    "empty": lambda d: torch.empty(3, device=d, pin_memory=True),
    "empty_strided": lambda d: torch.empty_strided((2, 3), (1, 2), device=d, pin_memory=True),
    "zeros_like": lambda d: torch.zeros_like(torch.ones(3, device=d), pin_memory=True),
    "new_full": lambda d: torch.ones(3, device=d).new_full((2,), 1.0, pin_memory=True),
    "arange": lambda d: torch.arange(4, device=d, pin_memory=True),
    "randperm": lambda d: torch.randperm(4, device=d, pin_memory=True),
    "tril_indices": lambda d: torch.tril_indices(3, 3, device=d, pin_memory=True),
    "kaiser_window": lambda d: torch.kaiser_window(4, device=d, pin_memory=True),
}


@pytest.mark.parametrize("make", PINNED_FACTORIES.values(), ids=PINNED_FACTORIES.keys())
def test_a_factory_asked_for_pinned_memory_is_refused_as_on_cuda(make):
    """pin_memory=True asks for page-locked host memory: the CPU gives it, CUDA's factories refuse it with "Only dense
    CPU tensors can be pinned"; openreg refused nothing and gave an unpinned device tensor, so such code passed on
    openreg and failed on CUDA. pin_memory=False is still taken."""
    assert make("cpu").is_pinned()
    with pytest.raises(RuntimeError, match="^Only dense CPU tensors can be pinned"):
        make("openreg")
    assert torch.ones(2, device="openreg", pin_memory=False).device == D0


# --------------------------------------------------------------------------- views


def _storage_ptr(t):
    return t.untyped_storage().data_ptr()


@pytest.mark.parametrize(
    "make_view",
    [
        pytest.param(lambda t: t.view(4, 6), id="view"),
        pytest.param(lambda t: t.transpose(0, 1), id="transpose"),
        pytest.param(lambda t: t.unfold(1, 3, 2), id="unfold"),
        pytest.param(lambda t: t.diagonal(), id="diagonal"),
        pytest.param(lambda t: t[1:5:2, ::3], id="slice"),
        pytest.param(lambda t: t.select(0, 3), id="select"),
        pytest.param(lambda t: t.narrow(1, 1, 3), id="narrow"),
        pytest.param(lambda t: t.as_strided((3, 3), (7, 2), 1), id="as_strided"),
        pytest.param(lambda t: t.unsqueeze(0).expand(2, 6, 4)[0], id="expand"),
        pytest.param(lambda t: t.reshape(24), id="reshape"),
        pytest.param(lambda t: t.permute(1, 0)[1:, 2:4], id="permute_slice"),
        pytest.param(lambda t: t.view(torch.int32), id="view_dtype"),
    ],
)
def test_views_share_memory(make_view):
    base_cpu = torch.arange(24, dtype=torch.float32).view(6, 4)
    base = base_cpu.to(D0)
    v, v_cpu = make_view(base), make_view(base_cpu)
    assert v.device == D0
    assert _storage_ptr(v) == _storage_ptr(base)
    assert v.shape == v_cpu.shape and v.stride() == v_cpu.stride()
    assert v.storage_offset() == v_cpu.storage_offset()
    assert_close(v.cpu(), v_cpu)
    # Writing through the view is visible in the base...
    v.mul_(2).add_(1) if v.is_floating_point() else v.add_(3)
    v_cpu.mul_(2).add_(1) if v_cpu.is_floating_point() else v_cpu.add_(3)
    assert_close(base.cpu(), base_cpu)
    # ...and writing to the base is visible in the view.
    base.sub_(5)
    base_cpu.sub_(5)
    assert_close(v.cpu(), v_cpu)


def test_view_chain_and_copy_into_view():
    base_cpu = torch.zeros(4, 6)
    base = base_cpu.to(D0)
    src_cpu = _cpu_randn(3, 2)
    base[1:4, ::3].copy_(src_cpu.to(D0))
    base_cpu[1:4, ::3].copy_(src_cpu)
    base.t()[2].fill_(9.0)
    base_cpu.t()[2].fill_(9.0)
    base.diagonal().zero_()
    base_cpu.diagonal().zero_()
    assert_close(base.cpu(), base_cpu)


def test_autograd_through_views():
    x_cpu = _cpu_randn(4, 5).requires_grad_()
    x = x_cpu.detach().to(D0).requires_grad_()
    for t in (x_cpu, x):
        y = t.transpose(0, 1)[1:, ::2].unfold(0, 2, 1).sum()
        (y * 3).backward()
    assert_close(x.grad.cpu(), x_cpu.grad)


# --------------------------------------------------------------------------- in-place and out=


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda t, o: t.add_(o, alpha=0.5), id="add_"),
        pytest.param(lambda t, o: t.mul_(o), id="mul_"),
        pytest.param(lambda t, o: t.clamp_(-0.5, 0.5), id="clamp_"),
        pytest.param(lambda t, o: t.addcmul_(o, o, value=2), id="addcmul_"),
        pytest.param(lambda t, o: t.masked_fill_(o > 0, -1.0), id="masked_fill_"),
        pytest.param(lambda t, o: t.index_add_(0, torch.tensor([0, 2, 0]).to(t.device), o[:3]), id="index_add_"),
        pytest.param(lambda t, o: t.scatter_(1, (o.abs() * 3).long().clamp(max=4), o), id="scatter_"),
        pytest.param(lambda t, o: t.scatter_add_(1, (o.abs() * 3).long().clamp(max=4), o), id="scatter_add_"),
        pytest.param(lambda t, o: t.copy_(o.t().contiguous().t()), id="copy_"),
        pytest.param(lambda t, o: t.exp_().div_(o.abs() + 1), id="exp_div_"),
        pytest.param(lambda t, o: t.lerp_(o, 0.3), id="lerp_"),
        pytest.param(lambda t, o: t.t().add_(1), id="inplace_on_transpose"),
    ],
)
def test_inplace_ops(op):
    t_cpu, o_cpu = _cpu_randn(5, 5), _cpu_randn(5, 5, seed=1)
    t, o = t_cpu.to(D0), o_cpu.to(D0)
    ptr = t.data_ptr()
    ret, ret_cpu = op(t, o), op(t_cpu, o_cpu)
    assert t.data_ptr() == ptr, "an in-place op moved its tensor"
    assert _storage_ptr(ret) == _storage_ptr(t)
    assert_close(t.cpu(), t_cpu)
    assert_close(ret.cpu(), ret_cpu)


def test_out_variant_writes_in_place():
    a_cpu, b_cpu = _cpu_randn(3, 4), _cpu_randn(3, 4, seed=1)
    a, b = a_cpu.to(D0), b_cpu.to(D0)
    c = torch.empty(3, 4, device=D0)
    ptr = c.data_ptr()
    ret = torch.add(a, b, alpha=2, out=c)
    assert ret is c and c.data_ptr() == ptr
    assert_close(c.cpu(), torch.add(a_cpu, b_cpu, alpha=2))


@pytest.mark.parametrize("out_shape", [(0,), (2, 2), (5, 7)], ids=["empty", "smaller", "larger"])
def test_out_variant_resizes_like_cpu(out_shape):
    a_cpu, b_cpu = _cpu_randn(3, 4), _cpu_randn(3, 4, seed=1)
    a, b = a_cpu.to(D0), b_cpu.to(D0)
    c_cpu = torch.zeros(out_shape)
    c = c_cpu.to(D0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "An output with one or more elements was resized"
        torch.add(a_cpu, b_cpu, out=c_cpu)
        ret = torch.add(a, b, out=c)
    assert ret is c
    assert c.shape == c_cpu.shape == (3, 4)
    assert c.stride() == c_cpu.stride()
    assert_close(c.cpu(), c_cpu)
    # The resized output is a working tensor.
    c.mul_(2)
    assert_close(c.cpu(), c_cpu * 2)


def test_out_variant_resize_follows_input_layout():
    """A resized out= tensor takes the layout the CPU kernel gives it (TensorIterator
    follows the inputs' memory layout), so strides match the CPU's."""
    a_cpu = _cpu_randn(3, 4)
    c_cpu = torch.empty(0)
    c = torch.empty(0, device=D0)
    torch.add(a_cpu.t(), 1, out=c_cpu)
    torch.add(a_cpu.to(D0).t(), 1, out=c)
    assert c.shape == c_cpu.shape
    assert c.stride() == c_cpu.stride()
    assert_close(c.cpu(), c_cpu)


def test_inplace_restride():
    """as_strided_ / resize_ change a device tensor's own metadata (run in a child process:
    a crash here must not take the test session down)."""
    proc = run_python(
        """
        import torch, openreg_eager
        c = torch.arange(6.0).to("openreg")
        c.as_strided_((2, 2), (1, 2))
        ref = torch.arange(6.0).as_strided_((2, 2), (1, 2))
        assert c.shape == ref.shape and c.stride() == ref.stride(), (c.shape, c.stride())
        assert torch.equal(c.cpu(), ref), c.cpu()
        d = torch.zeros(2, 3, device="openreg")
        d.resize_(4, 5)
        assert d.shape == (4, 5) and d.stride() == (5, 1)
        d.fill_(1.0)
        assert d.sum().item() == 20.0
        print("OK")
        """,
        env={},
    )
    assert proc.returncode == 0 and "OK" in proc.stdout, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"


def test_strict_mode_opens_every_argument_kind():
    """Under OPENREG_STRICT=1 device memory is closed to the host except for what a task names:
    every kind of argument the generic kernel captures (a tensor, a tensor list, an optional-tensor
    list, an out= tensor, a strided view, a host-run op) must be named, or the task faults."""
    proc = run_python(
        """
        import torch, openreg_eager
        from torch.testing import assert_close
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
        da, db = a.to("openreg"), b.to("openreg")
        assert_close((da + db * 2).cpu(), a + b * 2)
        assert_close(torch.cat([da, db, da]).cpu(), torch.cat([a, b, a]))
        assert_close(torch.stack([da.t(), db.t()]).cpu(), torch.stack([a.t(), b.t()]))
        rows = torch.tensor([0, 3, 5])
        assert_close(da[rows.to("openreg")].cpu(), a[rows])
        assert_close(da.index_put((rows.to("openreg"),), db[:3]).cpu(), a.index_put((rows,), b[:3]))
        out = torch.empty(6, 4, device="openreg")
        torch.mul(da, db, out=out)
        assert_close(out.cpu(), a * b)
        assert_close(da[::2, 1:].exp().cpu(), a[::2, 1:].exp())
        assert_close(torch.nonzero(da > 0).cpu(), torch.nonzero(a > 0))
        print("OK")
        """,
        env={"OPENREG_STRICT": "1"},
    )
    assert proc.returncode == 0 and "OK" in proc.stdout, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"


def test_out_variant_into_non_contiguous_output():
    a_cpu, b_cpu = _cpu_randn(3, 4), _cpu_randn(3, 4, seed=1)
    c_cpu = torch.zeros(4, 3).t()
    c = torch.zeros(4, 3, device=D0).t()
    torch.mul(a_cpu, b_cpu, out=c_cpu)
    torch.mul(a_cpu.to(D0), b_cpu.to(D0), out=c)
    assert c.stride() == c_cpu.stride()
    assert_close(c.cpu(), c_cpu)


def test_out_variants_of_reductions_and_matmul():
    a_cpu, b_cpu = _cpu_randn(3, 4), _cpu_randn(4, 2, seed=1)
    a, b = a_cpu.to(D0), b_cpu.to(D0)
    mm = torch.empty(0, device=D0)
    torch.mm(a, b, out=mm)
    assert_close(mm.cpu(), a_cpu @ b_cpu)
    s = torch.empty(0, device=D0)
    torch.sum(a, dim=1, out=s)
    assert_close(s.cpu(), a_cpu.sum(1))
    values, indices = torch.empty(0, device=D0), torch.empty(0, dtype=torch.long, device=D0)
    torch.max(a, dim=0, out=(values, indices))
    ref = torch.max(a_cpu, dim=0)
    assert_close(values.cpu(), ref.values)
    assert_close(indices.cpu(), ref.indices)


def _foreach_step(a, b, out):
    torch._foreach_add_([a, b], [b, a])
    torch._foreach_mul_([a, b], 0.25)  # keeps the values bounded over many steps


HOT_CALLS = {
    # Ops with typed kernels that lend their tensor arguments to the generic kernel without a reference.
    "add": lambda a, b, out: a + b,
    "add_": lambda a, b, out: a.add_(b, alpha=0.5).div_(2),
    "mm.out": lambda a, b, out: torch.mm(a, b, out=out),
    "addmm": lambda a, b, out: torch.addmm(out, a, b, beta=0.5),
    "native_layer_norm": lambda a, b, out: torch.nn.functional.layer_norm(a, (4,), b[0], b[1]),
    "_foreach_add_": _foreach_step,
}


@pytest.mark.parametrize("name", HOT_CALLS)
def test_typed_kernels_neither_keep_nor_release_their_arguments(name):
    import gc
    import weakref

    call = HOT_CALLS[name]
    cpu = [_cpu_randn(4, 4, seed=i) for i in range(3)]
    dev = [t.to(D0) for t in cpu]
    expected, result = call(*cpu), call(*dev)  # in-place calls change their arguments on both sides
    assert_close([t.cpu() for t in dev], cpu)
    if isinstance(expected, torch.Tensor):
        assert_close(result.cpu(), expected)
    alive = [weakref.ref(t) for t in dev]
    for _ in range(100):  # a lost reference would free them early: their memory would be reused under us
        call(*cpu)
        call(*dev)
        torch.empty(4, 4, device=D0).fill_(float("nan"))
    assert_close([t.cpu() for t in dev], cpu)
    del dev, result
    gc.collect()
    torch.openreg.synchronize()
    assert [ref() for ref in alive] == [None, None, None]  # an extra reference would keep them alive


# --------------------------------------------------------------------------- non-contiguous inputs


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda a, b: a + b, id="add"),
        pytest.param(lambda a, b: a * b.exp(), id="mul_exp"),
        pytest.param(lambda a, b: a @ b.t(), id="matmul"),
        pytest.param(lambda a, b: a.sum(dim=0), id="sum_dim"),
        pytest.param(lambda a, b: a.cumsum(1), id="cumsum"),
        pytest.param(lambda a, b: torch.sort(a, dim=1).values, id="sort"),
        pytest.param(lambda a, b: a.contiguous(), id="contiguous"),
        pytest.param(lambda a, b: a.clone(), id="clone"),
        pytest.param(lambda a, b: torch.where(a > b, a, b), id="where"),
        pytest.param(lambda a, b: a.softmax(-1), id="softmax"),
        pytest.param(lambda a, b: torch.cat([a, b]), id="cat"),
        pytest.param(lambda a, b: a.max(dim=1).indices, id="argmax"),
    ],
)
@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(lambda t: t.t(), id="transposed"),
        pytest.param(lambda t: t[:, ::2], id="strided"),
        pytest.param(lambda t: t[:1].expand(4, 8)[:, :6], id="expanded"),
        pytest.param(lambda t: t[1:7, 2:8], id="offset"),
    ],
)
def test_non_contiguous_inputs(op, layout):
    base_a, base_b = _cpu_randn(8, 8), _cpu_randn(8, 8, seed=1)
    a_cpu, b_cpu = layout(base_a), layout(base_b)
    a, b = layout(base_a.to(D0)), layout(base_b.to(D0))
    assert a.stride() == a_cpu.stride()
    if a.shape != b.shape:
        pytest.skip("shapes differ")
    ref = op(a_cpu, b_cpu)
    got = op(a, b)
    assert got.device == D0
    assert got.shape == ref.shape
    assert_close(got.cpu(), ref)


# --------------------------------------------------------------------------- dtype promotion


def _typed(dtype, seed):
    base = _cpu_randn(6, seed=seed) * 5
    if dtype == torch.bool:
        return base > 0
    return base.to(dtype)


@pytest.mark.parametrize(
    "dtypes,op",
    [
        ((torch.int32, torch.float32), lambda a, b: a + b),
        ((torch.uint8, torch.int8), lambda a, b: a + b),
        ((torch.bool, torch.int64), lambda a, b: a * b),
        ((torch.float16, torch.float32), lambda a, b: a - b),
        ((torch.bfloat16, torch.float16), lambda a, b: a + b),
        ((torch.int64, torch.int64), lambda a, b: a / (b.abs() + 1)),
        ((torch.int32, torch.int32), lambda a, b: torch.div(a, b.abs() + 1, rounding_mode="floor")),
        ((torch.int16, torch.float64), lambda a, b: torch.maximum(a, b)),
        ((torch.int64, torch.float32), lambda a, b: a * 1.5),
        ((torch.float32, torch.int64), lambda a, b: a + 3),
        ((torch.int32, torch.int32), lambda a, b: a * 2.5),
        ((torch.bool, torch.bool), lambda a, b: a + True),
        ((torch.float32, torch.float32), lambda a, b: a + torch.tensor(2.0, dtype=torch.float64)),
        ((torch.int32, torch.int32), lambda a, b: a + torch.tensor(2.5)),
        ((torch.float16, torch.float16), lambda a, b: a.sum()),
        ((torch.int32, torch.int32), lambda a, b: a.sum()),
        ((torch.bool, torch.bool), lambda a, b: a.sum()),
        ((torch.int64, torch.int64), lambda a, b: a.float().mean() + a.prod()),
        ((torch.complex64, torch.float64), lambda a, b: a * b),
        ((torch.uint8, torch.uint8), lambda a, b: a - b),
    ],
    ids=lambda v: "-".join(str(d).removeprefix("torch.") for d in v) if isinstance(v, tuple) else None,
)
def test_dtype_promotion_matches_cpu(dtypes, op):
    a_cpu, b_cpu = _typed(dtypes[0], 0), _typed(dtypes[1], 1)
    ref = op(a_cpu, b_cpu)
    got = op(a_cpu.to(D0), b_cpu.to(D0))
    assert got.dtype == ref.dtype
    assert got.device == D0
    assert_close(got.cpu(), ref)


def test_explicit_casts_match_cpu():
    x_cpu = _cpu_randn(20) * 300
    x = x_cpu.to(D0)
    for dtype in (torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8, torch.uint8,
                  torch.bool, torch.complex64):
        assert_close(x.to(dtype).cpu(), x_cpu.to(dtype), msg=lambda m, d=dtype: f"{d}: {m}")


# --------------------------------------------------------------------------- asynchronous errors


@pytest.mark.parametrize(
    "op",
    [
        pytest.param(lambda d: torch.mm(torch.ones(2, 3, device=d), torch.ones(2, 3, device=d)), id="mm_shapes"),
        pytest.param(lambda d: torch.ones(3, device=d).add_(torch.ones(2, 3, device=d)), id="inplace_broadcast"),
        pytest.param(lambda d: torch.cat([torch.ones(2, 3, device=d), torch.ones(2, 4, device=d)]), id="cat_shapes"),
        pytest.param(lambda d: torch.ones(6, device=d).view(4, 2), id="view_shape"),
        pytest.param(lambda d: torch.ones(2, 3, device=d) + torch.ones(4, 3, device=d), id="broadcast"),
        pytest.param(lambda d: torch.ones(3, device=d).long().add_(1.5), id="inplace_cast"),
    ],
)
def test_invalid_arguments_raise_at_the_call_like_cpu(op):
    """Errors the shapes and dtypes already decide are raised by the call itself, as on the CPU."""
    with pytest.raises(RuntimeError) as cpu_error:
        op("cpu")
    with pytest.raises(RuntimeError) as dev_error:
        op(D0)
    assert type(dev_error.value) is type(cpu_error.value)
    torch.openreg.synchronize()  # nothing was left to fail later


def test_async_kernel_error_surfaces_at_next_synchronize():
    x = torch.arange(3.0).to(D0)
    bad = torch.tensor([0, 10]).to(D0)
    torch.index_select(x, 0, torch.tensor([0, 1]).to(D0))  # the signature's first call ran at the call
    torch.openreg.synchronize()
    torch.openreg._sleep(50_000_000)  # a busy stream: a short op on an idle one runs at the call
    y = torch.index_select(x, 0, bad)  # queued: the bad index is only seen when the kernel runs
    assert y.device == D0
    with pytest.raises(IndexError, match="index_select"):
        torch.openreg.synchronize()
    # The error was reported once, and the device keeps working.
    torch.openreg.synchronize()
    z = x * 2 + 1
    assert_close(z.cpu(), torch.arange(3.0) * 2 + 1)
    assert_close(torch.index_select(x, 0, torch.tensor([2, 0]).to(D0)).cpu(), torch.tensor([2.0, 0.0]))


def test_async_kernel_error_surfaces_at_host_read():
    x = torch.arange(4.0).to(D0)
    bad = torch.tensor([1, -7]).to(D0)
    torch.index_select(x, 0, torch.tensor([0, 1]).to(D0))  # the signature's first call ran at the call
    torch.openreg.synchronize()
    torch.openreg._sleep(50_000_000)  # a busy stream: a short op on an idle one runs at the call
    torch.index_select(x, 0, bad)
    total = x.sum()
    with pytest.raises(IndexError, match="index_select"):
        total.item()
    assert x.sum().item() == 6.0
    assert_close((x + 1).cpu(), torch.arange(4.0) + 1)


def test_async_kernel_error_on_second_device():
    x = torch.arange(3.0).to(D1)
    bad = torch.tensor([5]).to(D1)
    torch.index_select(x, 0, torch.tensor([0]).to(D1))  # the signature's first call ran at the call
    torch.openreg.synchronize()
    with torch.openreg.device(1):
        torch.openreg._sleep(50_000_000)  # a busy stream: a short op on an idle one runs at the call
    torch.index_select(x, 0, bad)
    with pytest.raises(IndexError, match="index_select"):
        torch.openreg.synchronize(1)
    assert_close((x - 1).cpu(), torch.arange(3.0) - 1)


def test_launch_blocking_raises_at_the_call():
    proc = run_python(
        """
        import torch, openreg_eager
        x = torch.arange(float(1 << 15)).to("openreg")  # not a short op, which an idle stream runs at the call
        bad = torch.tensor([0, 1 << 16]).to("openreg")
        torch.index_select(x, 0, torch.tensor([0, 1]).to("openreg"))  # the first call runs at the call anyway
        try:
            torch.index_select(x, 0, bad)
        except IndexError as e:
            print("RAISED_AT_CALL", "index_select" in str(e))
        else:
            print("DID_NOT_RAISE")
        torch.openreg.synchronize()
        print("USABLE", (x[:3] * 2).tolist())
        """,
        env={"OPENREG_LAUNCH_BLOCKING": "1"},
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "RAISED_AT_CALL True" in proc.stdout, out
    assert "USABLE [0.0, 2.0, 4.0]" in proc.stdout, out


def _bad_index_select(d):
    return torch.index_select(torch.arange(3.0, device=d), 0, torch.tensor([0, 10], device=d))


def test_a_short_op_after_a_read_runs_at_the_call_and_fails_as_on_the_cpu():
    """An idle stream runs a short op at the call (its result is most often read next): a data-dependent error is
    then the CPU's, raised by the call, and nothing is left to fail later."""
    torch.index_select(torch.arange(3.0, device=D0), 0, torch.tensor([0, 1], device=D0))  # first call: at the call
    with pytest.raises(IndexError) as cpu_error:
        _bad_index_select("cpu")
    torch.openreg.synchronize()
    with pytest.raises(IndexError) as dev_error:
        _bad_index_select(D0)
    assert str(dev_error.value) == str(cpu_error.value)
    torch.openreg.synchronize()  # raised once, at the call


def test_short_ops_launched_on_and_on_are_queued():
    """Only the first few short ops after a read run at the call: a host that launches on and on gains from the
    device running them meanwhile, so the later ones are queued, and their errors surface at the next sync."""
    x = torch.arange(3.0, device=D0)
    index = torch.tensor([0, 10], device=D0)
    torch.index_select(x, 0, torch.tensor([0, 1], device=D0))  # the signature's first call ran at the call
    torch.openreg.synchronize()
    for _ in range(10):
        x.add_(1)
    torch.index_select(x, 0, index)  # queued: raises nothing here
    with pytest.raises(IndexError, match="index_select"):
        torch.openreg.synchronize()
    assert x.cpu().tolist() == [10.0, 11.0, 12.0]


# --------------------------------------------------------------------------- process exit


def test_exit_does_not_race_the_autograd_threads():
    """backward() stashes a copy of the caller's contextvars in its graph task, which a device's autograd thread may
    release after backward() returned (here about one time in seven); at exit, openreg waits for those threads so that
    the release never meets a finalising interpreter (it aborted the process). The wait leaves nothing of the last
    graph task alive."""
    import contextvars
    import weakref

    from openreg_runtime.device._devices import _flush_autograd_threads

    class Marker:
        pass

    var = contextvars.ContextVar("held_by_the_graph_task")
    for _ in range(20):
        marker = Marker()
        alive = weakref.ref(marker)
        token = var.set(marker)
        x = torch.ones(3, device=D0, requires_grad=True)
        (x * 2).sum().backward()
        var.reset(token)
        del marker
        _flush_autograd_threads()
        assert alive() is None
