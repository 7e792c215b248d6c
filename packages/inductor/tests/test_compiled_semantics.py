"""What torch.compile on openreg must preserve besides the numbers: dynamic shapes without recompiling,
graph breaks, host copies and CPU tensors inside graphs, autocast, the current device, asynchronous
launches, streams, and strict mode. Every result is compared with the same computation run eagerly on
the CPU."""

from __future__ import annotations

import signal
import time
import warnings

import pytest
import torch
from compile_helpers import (
    DEVICE,
    assert_close_cpu,
    assert_openreg_kernels,
    generated_code,
    reset,
)
from torch._dynamo.testing import CompileCounterWithBackend

from openreg_runtime.testing import (
    run_python,
)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    reset()
    yield
    reset()


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# Dynamic shapes --------------------------------------------------------------------------------------


def _dynamic_fn(x, w):
    h = torch.relu(x @ w)
    # reductions over the dynamic (batch) dimension and over the static one
    return h.softmax(dim=-1) * x.mean() + h.sum(dim=0), torch.tanh(h).sum(dim=-1)


def test_dynamic_shapes_compile_once_for_all_batch_sizes():
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(_dynamic_fn, dynamic=True, backend=counter)
    w = _randn(6, 4, seed=1)  # x: (batch, 6)
    with generated_code() as codes:
        for batch in (2, 3, 5, 9):
            x = _randn(batch, 6, seed=batch)
            got = compiled(x.to(DEVICE), w.to(DEVICE))
            assert [t.shape for t in got] == [(batch, 4), (batch,)]
            assert all(t.device.type == DEVICE for t in got)
            assert_close_cpu(got, _dynamic_fn(x, w), what=f"batch {batch}")
    assert counter.frame_count == 1, f"compiled {counter.frame_count} times for 4 batch sizes"
    assert_openreg_kernels(codes)


# Graph breaks ----------------------------------------------------------------------------------------


def _broken_fn(x):
    y = torch.sin(x) * 2 + x
    torch._dynamo.graph_break()
    return (y.cos() * x).sum(dim=1)


def test_graph_break_gives_the_eager_result():
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(_broken_fn, backend=counter)
    x = _randn(5, 7)
    with generated_code() as codes:
        got = compiled(x.to(DEVICE))
    assert counter.frame_count == 2, "expected one graph before the break and one after"
    assert got.device.type == DEVICE
    assert_close_cpu(got, _broken_fn(x))
    assert_openreg_kernels(codes, expected_graphs=2)


# Host copies and CPU tensors inside graphs -----------------------------------------------------------


def _to_host_fn(x):
    y = torch.relu(x * 2 - 1).sum(dim=0)
    z = y.cpu()
    return torch.exp(-z) * 3 + z.sum()


def test_cpu_copy_inside_fullgraph():
    x = _randn(4, 5)
    with generated_code() as codes:
        got = torch.compile(_to_host_fn, fullgraph=True)(x.to(DEVICE))
    assert got.device.type == "cpu"
    assert_close_cpu(got, _to_host_fn(x))
    assert_openreg_kernels(codes)


def _with_cpu_scalar(x, s):
    return (x * s + s).tanh()


def _cpu_scalar_first(s, x):
    return s + x, s * x, s / x


def _moves_cpu_tensor_in(x, c):
    return torch.sigmoid(x) + c.to(x.device) * 2


MIXED = {
    # an openreg tensor with a 0-dim CPU tensor (a CPU scalar may take part in device computations)
    "cpu_scalar_tensor": (_with_cpu_scalar, lambda: (_randn(3, 4), torch.tensor(1.5)), (True, False)),
    # ... as the first operand: the results are still on openreg, as in eager and on CUDA
    "cpu_scalar_first": (_cpu_scalar_first, lambda: (torch.tensor(2.0), _randn(3, 4)), (False, True)),
    # a CPU tensor copied to openreg inside the graph
    "copy_to_openreg": (_moves_cpu_tensor_in, lambda: (_randn(3, 4), _randn(3, 4, seed=1)), (True, False)),
}


@pytest.mark.parametrize("name", list(MIXED))
def test_graph_mixing_cpu_and_openreg(name):
    fn, make_inputs, on_device = MIXED[name]
    cpu_inputs = make_inputs()
    args = [t.to(DEVICE) if move else t for t, move in zip(cpu_inputs, on_device, strict=True)]
    assert any(a.device.type == "cpu" for a in args)
    with generated_code() as codes:
        got = torch.compile(fn, fullgraph=True)(*args)
    assert all(t.device.type == DEVICE for t in torch.utils._pytree.tree_leaves(got))
    assert_close_cpu(got, fn(*cpu_inputs))
    assert_openreg_kernels(codes)


# Autocast --------------------------------------------------------------------------------------------


def _autocast_fn(a, b):
    with torch.autocast(a.device.type, dtype=torch.bfloat16):
        c = a @ b
        d = torch.relu(c) + 1
    return c, d.float().sum(dim=0)


def test_autocast_bfloat16_inside_compiled_function():
    a, b = _randn(8, 16), _randn(16, 8, seed=1)
    expected = _autocast_fn(a, b)  # eager CPU autocast, bfloat16
    assert expected[0].dtype == torch.bfloat16
    with generated_code() as codes:
        got = torch.compile(_autocast_fn)(a.to(DEVICE), b.to(DEVICE))
    assert got[0].dtype == torch.bfloat16, f"matmul under autocast gave {got[0].dtype}"
    assert got[1].dtype == torch.float32
    assert all(t.device.type == DEVICE for t in got)
    assert_close_cpu(got, expected, atol=1e-2, rtol=1e-2)
    assert_openreg_kernels(codes)


# The current device ----------------------------------------------------------------------------------


def _device_fn(x, y):
    return (x * y).sin() + torch.ones_like(x) + x.sum(dim=1, keepdim=True)


def test_graph_on_second_device():
    if torch.openreg.device_count() < 2:
        pytest.fail("this test needs OPENREG_DEVICE_COUNT >= 2 (the default is 2)")
    x, y = _randn(4, 6), _randn(4, 6, seed=1)
    assert torch.openreg.current_device() == 0
    with generated_code() as codes:
        got = torch.compile(_device_fn)(x.to("openreg:1"), y.to("openreg:1"))
    assert torch.openreg.current_device() == 0
    assert got.device == torch.device("openreg:1")
    torch.openreg.synchronize(1)
    assert_close_cpu(got, _device_fn(x, y))
    assert_openreg_kernels(codes)


# Asynchrony ------------------------------------------------------------------------------------------

SLEEP_MS = 300


def _async_fn(x):
    return (x.exp() + x * 3).sum(dim=1)


def test_compiled_call_does_not_wait_for_the_stream():
    compiled = torch.compile(_async_fn)
    x = _randn(64, 64)
    dev_x = x.to(DEVICE)
    compiled(dev_x)  # compiles
    torch.openreg.synchronize()

    torch.openreg._sleep(SLEEP_MS * 1_000_000)
    start = time.perf_counter()
    got = compiled(dev_x)
    call_s = time.perf_counter() - start
    torch.openreg.synchronize()
    total_s = time.perf_counter() - start
    assert call_s < SLEEP_MS / 1000 / 2, f"the compiled call took {call_s * 1000:.0f} ms: it waited for the stream"
    assert total_s >= SLEEP_MS / 1000 * 0.8, "the queued sleep did not delay the stream (the test proves nothing)"
    assert_close_cpu(got, _async_fn(x))


# Streams ---------------------------------------------------------------------------------------------


def _on_side_stream(x, s):
    with torch.openreg.stream(s):
        y = x * 2
    # y comes from s: as on CUDA, the current stream must wait for s before reading it.
    torch.openreg.current_stream().wait_stream(s)
    return y + 1


def test_stream_context_inside_fullgraph():
    """Work under `with stream(s)` runs on s, and the traced wait_stream orders the current stream after it:
    with s held up by a queued sleep, reading y on the current stream without that wait reads it unwritten."""
    compiled = torch.compile(_on_side_stream, fullgraph=True)
    s = torch.openreg.Stream()
    with generated_code() as codes:
        compiled(_randn(16, 16, seed=1).to(DEVICE), s)
    assert_openreg_kernels(codes)
    assert torch.openreg.current_stream() == torch.openreg.default_stream()
    x = _randn(16, 16, seed=2)
    dev_x = x.to(DEVICE)
    with torch.openreg.stream(s):
        torch.openreg._sleep(SLEEP_MS * 1_000_000)
    got = compiled(dev_x, s)
    torch.openreg.synchronize()
    assert_close_cpu(got, x * 2 + 1)


def _only_on_side_stream(x, s):
    with torch.openreg.stream(s):
        return torch.sin(x) * 2


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_work_in_stream_context_runs_on_that_stream(compiled):
    """What runs under `with torch.openreg.stream(s)` is ordered on s, not on the current stream: while
    the current stream is busy, the result can be read on s (the eager case checks the premise)."""
    fn = torch.compile(_only_on_side_stream, fullgraph=True) if compiled else _only_on_side_stream
    s = torch.openreg.Stream()
    fn(_randn(32, 32, seed=1).to(DEVICE), s)  # compiles (compiled case)
    x = _randn(32, 32, seed=2)  # new values: a reused block may hold the previous result
    dev_x = x.to(DEVICE)
    torch.openreg.synchronize()
    torch.openreg._sleep(SLEEP_MS * 1_000_000)  # the current (default) stream is busy
    y = fn(dev_x, s)
    with torch.openreg.stream(s):
        got = y.cpu()  # ordered on s only
    torch.openreg.synchronize()
    assert_close_cpu(got, torch.sin(x) * 2, what="result read on the side stream")


def _synchronizes(x):
    y = x.cos() * 2
    torch.openreg.synchronize()
    return y + 1


def test_synchronize_inside_fullgraph_waits_for_the_device():
    compiled = torch.compile(_synchronizes, fullgraph=True)
    x = _randn(8, 8)
    dev_x = x.to(DEVICE)
    with generated_code() as codes:
        compiled(dev_x)
    assert_openreg_kernels(codes)
    torch.openreg.synchronize()
    torch.openreg._sleep(SLEEP_MS * 1_000_000)
    start = time.perf_counter()
    got = compiled(dev_x)
    call_s = time.perf_counter() - start
    assert call_s >= SLEEP_MS / 1000 * 0.8, (
        f"the compiled function returned after {call_s * 1000:.0f} ms: its torch.openreg.synchronize() did not "
        f"wait for the {SLEEP_MS} ms queued on the stream")
    torch.openreg.synchronize()
    assert_close_cpu(got, _synchronizes(x))


def _current_stream(x):
    s = torch.openreg.current_stream()
    return x + 1, s


def test_current_stream_inside_fullgraph():
    compiled = torch.compile(_current_stream, fullgraph=True)
    x = _randn(8, 8)
    side = torch.openreg.Stream()
    for stream in (torch.openreg.default_stream(), side, torch.openreg.default_stream()):
        with torch.openreg.stream(stream):
            got, current = compiled(x.to(DEVICE))
            assert current == stream, f"current_stream() in a compiled function gave {current}, not {stream}"
            expected_eager = _current_stream(x.to(DEVICE))[1]
            assert current == expected_eager
            stream.synchronize()
        assert_close_cpu(got, x + 1)


# Half-precision FFTs --------------------------------------------------------------------------------


def _half_spectrum(t):
    return torch.fft.rfft(t).abs()


def test_a_compiled_float16_fft_keeps_cuffts_power_of_two_rule():
    """openreg computes a float16 FFT widened (csrc/kernels/fft.cpp), so the traced graph holds float32 FFT
    kernels; cuFFT's rule that every transformed size be a power of two is checked as the graph is traced."""
    compiled = torch.compile(_half_spectrum)
    x = _randn(4, 8).half()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
        assert_close_cpu(compiled(x.to(DEVICE)), _half_spectrum(x.to(DEVICE)).cpu())
        with pytest.raises(RuntimeError, match=r"powers of two when computing in half precision, .*size of\[6\]"):
            compiled(_randn(4, 6).half().to(DEVICE))


@pytest.mark.skipif(not hasattr(torch.ops.aten, "shallow_copy_data_"),
                    reason="this torch traces `.data =` with set_, which refuses a tensor of another device for every "
                           "device, CUDA's too")
def test_data_assigned_from_another_device_compiles_as_on_cuda():
    def move_and_add(x):
        x.data = x.data.to(DEVICE)
        return x + 1

    eager_x, compiled_x = _randn(4), _randn(4)
    expected = move_and_add(eager_x)
    got = torch.compile(move_and_add, fullgraph=True)(compiled_x)
    assert got.device == expected.device and compiled_x.device == eager_x.device
    assert_close_cpu(got, expected.cpu())
    assert_close_cpu(compiled_x, eager_x.cpu())


# Host scalars in half precision --------------------------------------------------------------------


def _shifted(x):
    return x + 1.7, x - 1.7, 1.7 - x


def _margin_loss_grads(loss, a, b):
    a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
    loss(a, b, torch.ones_like(a)).backward()
    return a.grad, b.grad


def _margin_loss(a, b, t):
    return torch.nn.functional.margin_ranking_loss(a, b, t, margin=1.7)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_compiled_add_and_sub_of_a_python_scalar_round_as_eager_does_on_openreg(dtype):
    """Inductor keeps add's and sub's Python scalars in float on every device but the CPU and MPS, as CUDA's eager
    kernels read them; openreg's eager kernels read them so too (eager/csrc/kernels/add_sub_scalars.cpp). Values at
    the boundary: 1.7 rounded to the dtype would cancel them exactly."""
    boundary = 1.703125 if dtype == torch.bfloat16 else 1.7001953125
    x = torch.tensor([-boundary, boundary, 0.5], dtype=dtype, device=DEVICE)
    for eager, compiled in zip(_shifted(x), torch.compile(_shifted)(x), strict=True):
        assert torch.equal(compiled.cpu(), eager.cpu())
    assert _shifted(x)[0][0].item() != 0  # CUDA's value, not the CPU's
    # the clamp's boundary decides the gradient mask: compiled must take the side eager takes
    a, b = torch.full((2,), boundary, dtype=dtype, device=DEVICE), torch.zeros(2, dtype=dtype, device=DEVICE)
    for eager, compiled in zip(_margin_loss_grads(_margin_loss, a, b),
                               _margin_loss_grads(torch.compile(_margin_loss), a, b), strict=True):
        assert torch.equal(compiled.cpu(), eager.cpu())


# Convolution layouts ---------------------------------------------------------------------------------

_CL = torch.channels_last
# (input, weight, conv): openreg's convolution (the CPU's) keeps channels-last where the input or the weight is, as
# CUDA's does; the last case is big enough for Inductor's layout optimisation to make the weight channels-last.
CONV_LAYOUTS = {
    "channels-last input": (lambda: (_randn(2, 8, 6, 6).to(memory_format=_CL), _randn(4, 8, 3, 3, seed=1)),
                            torch.nn.functional.conv2d),
    "channels-last weight": (lambda: (_randn(2, 8, 6, 6), _randn(4, 8, 3, 3, seed=1).to(memory_format=_CL)),
                             torch.nn.functional.conv2d),
    "conv1d of a permuted input": (lambda: (_randn(4, 10, 1).permute(0, 2, 1), _randn(6, 1, 3, seed=1)),
                                   lambda x, w: torch.nn.functional.conv1d(x, w, padding=1)),
    "layout optimisation": (lambda: (_randn(8, 256, 16, 16), _randn(384, 256, 1, 1, seed=1)),
                            torch.nn.functional.conv2d),
}


@pytest.mark.parametrize("case", CONV_LAYOUTS)
def test_a_compiled_convolution_runs_with_the_layout_eager_gives(case):
    """FakeTensor, which torch.compile traces with, took the layout of an openreg convolution's result from the
    `Overrideable` backend torch picks for an out-of-tree device, always contiguous: the compiled code's stride
    assertion failed ("expected ... stride 1==256") wherever eager keeps channels-last. Forward and backward give
    the CPU's values and the compiled result the CPU's compiled layout; the fake result has eager's layout."""
    make, conv = CONV_LAYOUTS[case]
    x, w = make()

    def step(x, w):
        out = conv(x, w) + 1
        out.square().sum().backward()
        return out

    results = {}
    for device in ("cpu", DEVICE):
        xr, wr = x.to(device), w.to(device)
        with torch._subclasses.FakeTensorMode() as mode:
            fake = conv(mode.from_tensor(xr), mode.from_tensor(wr))
        assert fake.stride() == conv(xr, wr).stride(), device
        reset()
        forward = torch.compile(lambda x, w: conv(x, w) + 1)(xr, wr)
        reset()
        xd, wd = x.to(device, copy=True).requires_grad_(), w.to(device, copy=True).requires_grad_()
        results[device] = forward, torch.compile(step)(xd, wd), xd.grad, wd.grad
    assert [r.stride() for r in results[DEVICE][:2]] == [r.stride() for r in results["cpu"][:2]]
    for got, expected in zip(results[DEVICE], results["cpu"], strict=True):
        torch.testing.assert_close(got.cpu(), expected, atol=1e-3, rtol=1e-4)


# Combo kernels ---------------------------------------------------------------------------------------


def _means(x):
    return x.mean(), x.mean(-1), torch.mean(x, -2, keepdim=True), x.mean([0, 1])


def test_combo_kernels_leave_openregs_kernels_apart_as_the_cpus():
    """combo_kernels=True groups independent kernels into one Triton kernel, leaving the CPU's (and MPS's) apart;
    openreg's, C++ as the CPU's, were grouped and Inductor failed ("type(self)=<class '...Scheduler'>")."""
    x = _randn(1, 2, 4, 8)
    assert_close_cpu(torch.compile(_means, options={"combo_kernels": True})(x.to(DEVICE)), _means(x))


# Strict mode -----------------------------------------------------------------------------------------

STRICT_SCRIPT = """
import ctypes
import torch

def f(x, w):
    h = torch.relu(x @ w + 1)
    return h.softmax(dim=-1) * x.sum() + h.mean(dim=0)

g = torch.Generator().manual_seed(0)
x, w = torch.randn(6, 5, generator=g), torch.randn(5, 4, generator=g)
expected = f(x, w)
got = torch.compile(f, fullgraph=True)(x.to("openreg"), w.to("openreg"))
assert got.device.type == "openreg", got.device
torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)
print("strict ok", flush=True)
# Strict mode was really on: the host reading the compiled graph's output faults.
torch.openreg.synchronize()
print(ctypes.string_at(got.data_ptr(), 4).hex(), flush=True)
"""


def test_strict_mode_compiled_kernels_open_device_memory():
    out = run_python(STRICT_SCRIPT, env={"OPENREG_STRICT": "1"})
    described = f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr[-4000:]}"
    assert out.stdout.splitlines() == ["strict ok"], described
    assert out.returncode == -signal.SIGSEGV, described


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("device", ["cpu", DEVICE])
def test_a_checkpointed_region_recomputes_the_dropout_mask_its_forward_drew(device, backend):
    """The partitioner saves the RNG state before a checkpointed region's random op and restores it for the
    recomputation in the backward (torch's rng_prims), as on CUDA: the gradient is zero exactly where the forward
    dropped an element."""
    from torch.utils.checkpoint import checkpoint

    def block(x):
        return torch.nn.functional.dropout(x * 2, p=0.5, training=True)

    compiled = torch.compile(lambda x: checkpoint(block, x, use_reentrant=False), backend=backend)
    torch.manual_seed(0)
    x = torch.rand(64, 64, device=device).add_(0.5).requires_grad_()
    out = compiled(x)
    out.backward(torch.ones_like(out))
    kept = (out != 0).cpu()
    assert 0 < kept.sum() < kept.numel()
    torch.testing.assert_close(x.grad.cpu(), kept * 4.0, rtol=0, atol=0)  # 2 / (1 - p) where kept, else 0


@pytest.mark.parametrize("device", ["cpu", DEVICE])
def test_a_traced_rng_state_replay_draws_what_it_saved(device):
    """rng_prims traced by make_fx (its proxy-mode kernel selects the device's state functions itself), then
    compiled: the replay from the saved state draws what the saving call drew, as on the CPU and CUDA."""
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._prims.rng_prims import run_and_save_rng_state, run_with_rng_state
    from torch.fx.experimental.proxy_tensor import make_fx

    def draw_twice():
        state, first = run_and_save_rng_state(torch.ops.aten.rand.default, [4, 4], dtype=torch.float32, device=device)
        return first, run_with_rng_state(state, torch.ops.aten.rand.default, [4, 4], dtype=torch.float32,
                                         device=device)

    first, again = compile_fx_inner(make_fx(draw_twice)(), ())(())
    assert first.device.type == device
    assert torch.equal(first.cpu(), again.cpu())
    assert not torch.equal(first.cpu(), torch.rand(4, 4, device=device).cpu())  # a draw, not a constant
