"""Graph capture and replay on openreg, checked against torch.cuda's CUDA graph semantics and against the CPU.

Capture records the work queued on the capturing stream without running it; replay queues that work again on the
current stream. Covered: replayed values against the same computation on the CPU, the calls forbidden while
capturing, the capture error modes with threads, fork/join across streams, the graphs' private memory pools,
random ops, the whole-network training recipe of PyTorch's CUDA graphs docs, torch.accelerator.Graph and debug_dump.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import threading
import time
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

import openreg_eager  # noqa: F401  (registers the openreg kernels)

D = torch.device("openreg:0")


def _cpu_randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _graph(keep_graph=False):
    return torch.openreg.OpenRegGraph(keep_graph=keep_graph)


def _full(value, n):
    return torch.full((n,), float(value))


@contextlib.contextmanager
def _capturing(graph, stream=None, **kwargs):
    """graph.capture_begin(**kwargs) with `stream` (a new side stream by default) current; the body ends the capture.
    If the body fails first, the capture is ended here, so that the next tests do not start inside it."""
    stream = stream if stream is not None else torch.openreg.Stream()
    with torch.openreg.stream(stream):
        graph.capture_begin(**kwargs)
        try:
            yield stream
        finally:
            if torch.openreg.is_current_stream_capturing():
                with contextlib.suppress(RuntimeError):
                    graph.capture_end()


def _assert_usable(stream):
    """After a failed capture, `stream` is not capturing and runs eager work; the device synchronizes."""
    with torch.openreg.stream(stream):
        assert not torch.openreg.is_current_stream_capturing()
        y = torch.arange(5.0, device=D) * 3
    stream.synchronize()
    torch.openreg.synchronize()
    assert_close(y.cpu(), torch.arange(5.0) * 3)


# --------------------------------------------------------------------------- capture and replay values


def test_capture_records_without_running_and_each_replay_runs_once():
    """As on CUDA: captured work does not run at capture, even an op's first call (no warm-up); every replay runs all
    of it once more. is_current_stream_capturing is true on the capturing stream only, during the capture."""
    a_cpu, b_cpu = _cpu_randn(7, 13, seed=3), _cpu_randn(7, 13, seed=4)
    a, b, out, x = a_cpu.to(D), b_cpu.to(D), torch.zeros(7, 13, device=D), torch.zeros(16, device=D)
    s, other, g = torch.openreg.Stream(), torch.openreg.Stream(), _graph()
    assert not torch.openreg.is_current_stream_capturing()
    with torch.openreg.graph(g, stream=s):
        assert torch.openreg.current_stream() == s
        x.add_(1)
        y = x * 2
        out.copy_(torch.hypot(a, b) * torch.atan2(a, b))
        capturing = torch.openreg.is_current_stream_capturing()
        with torch.openreg.stream(other):
            capturing_other = torch.openreg.is_current_stream_capturing()
    assert (capturing, capturing_other) == (True, False)
    with torch.openreg.stream(s):
        assert not torch.openreg.is_current_stream_capturing()
    assert_close(x.cpu(), _full(0, 16))
    assert_close(out.cpu(), torch.zeros(7, 13))
    for i in range(1, 4):
        g.replay()
        assert_close(y.cpu(), _full(2 * i, 16))
    assert_close(x.cpu(), _full(3, 16))
    assert_close(out.cpu(), torch.hypot(a_cpu, b_cpu) * torch.atan2(a_cpu, b_cpu))


def test_static_input_copy_then_replay_matches_cpu():
    """The CUDA docs' pattern (after a side-stream warm-up): copy new data into the static input, replay, read the
    static output."""
    w_cpu, b_cpu = _cpu_randn(32, 8, seed=1), _cpu_randn(8, seed=2)
    w, b = w_cpu.to(D), b_cpu.to(D)

    def f(x, w, b):
        return torch.relu(x.sin() @ w + b).sum(dim=1) / (1 + x.abs().mean())

    static_x = torch.zeros(4, 32, device=D)
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        f(static_x, w, b)
    torch.openreg.current_stream().wait_stream(side)
    g = _graph()
    with torch.openreg.graph(g):
        out = f(static_x, w, b)
    for seed in range(3):
        x_cpu = _cpu_randn(4, 32, seed=10 + seed)
        static_x.copy_(x_cpu)
        g.replay()
        assert_close(out.cpu(), f(x_cpu, w_cpu, b_cpu))


def _with_numbers(x, mask):
    """Python numbers where the ops take tensors: floats, integers past float32's precision, a number where."""
    y = x * 0.999 + 1e-3
    z = (y - 3) * (2**40 + 1)
    return torch.where(mask, z, 0.1), y / 7


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
                                   torch.int32], ids=str)
def test_python_numbers_in_a_replayed_graph_compute_as_on_the_cpu(dtype):
    """A replay computes with the numbers captured, bit for bit as the CPU computes with them at every call (a
    replay casts them once, where the CPU's kernel casts them each time)."""
    mask_cpu = _cpu_randn(64, seed=5) > 0
    static_x, mask = torch.zeros(64, dtype=dtype, device=D), mask_cpu.to(D)
    g = _graph()
    with torch.openreg.graph(g):
        outs = _with_numbers(static_x, mask)
    for seed in range(3):
        x_cpu = (_cpu_randn(64, seed=20 + seed) * 100).to(dtype)
        static_x.copy_(x_cpu)
        g.replay()
        for got, want in zip(outs, _with_numbers(x_cpu, mask_cpu), strict=True):
            assert got.dtype == want.dtype
            assert_close(got.cpu(), want, rtol=0, atol=0)


def test_replay_is_queued_on_the_current_stream():
    """As cudaGraphLaunch: replay returns at once and runs on the current stream, after the work queued before it."""
    x = torch.zeros(1024, device=D)
    x.fill_(0)  # warm-up: a signature's first call runs at the call
    (x + 1).cpu()
    g = _graph()
    with torch.openreg.graph(g):
        y = x + 1
    side = torch.openreg.Stream()
    with torch.openreg.stream(side):
        torch.openreg._sleep(300_000_000)
        x.fill_(5)
        start = time.perf_counter()
        g.replay()
        elapsed = time.perf_counter() - start
        done = side.record_event()
    assert elapsed < 0.15, f"replay blocked for {elapsed:.3f}s behind a busy stream"
    assert not done.query(), "the replayed work completed while its stream was still busy"
    assert torch.openreg.default_stream().query(), "replay queued work on a stream that is not current"
    side.synchronize()
    assert_close(y.cpu(), _full(6, 1024))


def test_a_graph_replays_on_the_device_it_was_captured_on():
    """As CUDAGraph.replay, which guards the capture's device: a graph of openreg:1 replays there, whichever device
    is current."""
    x = torch.ones(5, device="openreg:1")
    g = _graph()
    with torch.openreg.device(1):
        with torch.openreg.graph(g):  # on a side stream of openreg:1
            x.mul_(2)
    assert_close(x.cpu(), _full(1, 5))
    assert torch.openreg.current_device() == 0
    g.replay()
    assert_close(x.cpu(), _full(2, 5))


@pytest.mark.parametrize("instantiate", [False, True], ids=["on_first_replay", "explicit"])
def test_keep_graph_reset_and_recapture(instantiate):
    """As CUDAGraph: with keep_graph=True, instantiate() or the first replay makes the graph runnable; replay without
    a capture raises; after reset() the same object captures anew."""
    g = _graph(keep_graph=True)
    with pytest.raises(RuntimeError):
        g.replay()
    x = torch.ones(8, device=D)
    with torch.openreg.graph(g):
        x.mul_(3)
    if instantiate:
        g.instantiate()
    g.replay()
    g.replay()
    assert_close(x.cpu(), _full(9, 8))
    g.reset()
    with pytest.raises(RuntimeError):
        g.replay()
    with torch.openreg.graph(g):
        x.add_(1)
    g.replay()
    assert_close(x.cpu(), _full(10, 8))


def test_only_a_kept_graph_is_instantiated_by_the_user():
    """CUDAGraph's rule: without keep_graph=True, capture_end() instantiates, and instantiate() is refused."""
    g, x = _graph(), torch.ones(8, device=D)
    with torch.openreg.graph(g):
        x.mul_(3)
    with pytest.raises(RuntimeError, match=r"instantiate\(\) is intended to be called by the user only when "
                                           r"keep_graph=true"):  # CUDA's words
        g.instantiate()
    g.replay()
    assert_close(x.cpu(), _full(3, 8))


def test_capturing_nothing_warns_as_cuda_does():
    x, g = torch.ones(8, device=D), _graph()
    with pytest.warns(UserWarning, match="graph is empty. This usually means that the graph was attempted to be "
                                         "captured on wrong device or stream"):
        with torch.openreg.graph(g):
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.openreg.graph(_graph()):
            x.mul_(2)


# --------------------------------------------------------------------------- what capture forbids

FORBIDDEN = [
    ("item", "global", lambda x, s: x.sum().item()),
    ("cpu", "global", lambda x, s: x.cpu()),
    ("device_synchronize", "global", lambda x, s: torch.openreg.synchronize()),
    ("nonzero", "global", lambda x, s: torch.nonzero(x)),
    *((f"stream_synchronize_{m}", m, lambda x, s: s.synchronize()) for m in ("global", "thread_local", "relaxed")),
    # cudaStreamQuery / cudaEventQuery of captured work are errors too, whatever the mode.
    *((f"stream_query_{m}", m, lambda x, s: s.query()) for m in ("global", "relaxed")),
    ("event_query", "relaxed", lambda x, s: s.record_event().query()),
]


@pytest.mark.parametrize("mode, action", [c[1:] for c in FORBIDDEN], ids=[c[0] for c in FORBIDDEN])
def test_synchronizing_call_raises_and_invalidates_the_capture(mode, action):
    """As cudaErrorStreamCaptureUnsupported/Invalidated: a call that waits for the capturing stream raises (in every
    mode), the capture cannot end, its work never runs, and the device works afterwards, a new capture included."""
    x = torch.arange(6.0, device=D)
    g = _graph()
    with _capturing(g, capture_error_mode=mode) as s:
        x.add_(1)
        with pytest.raises(RuntimeError, match="capturing"):
            action(x, s)
        with pytest.raises(RuntimeError):
            g.capture_end()
    _assert_usable(s)
    assert_close(x.cpu(), torch.arange(6.0))
    g2 = _graph()
    with torch.openreg.graph(g2):
        x.add_(1)
    g2.replay()
    assert_close(x.cpu(), torch.arange(6.0) + 1)


def test_graph_context_manager_exit_raises_after_a_forbidden_call():
    """torch.cuda.graph's exit ends the capture, which raises once a forbidden call invalidated it."""
    x, s = torch.ones(4, device=D), torch.openreg.Stream()
    with pytest.raises(RuntimeError):
        with torch.openreg.graph(_graph(), stream=s):
            with pytest.raises(RuntimeError, match="capturing"):
                x.sum().item()
    torch.openreg.set_stream(torch.openreg.default_stream())  # torch.cuda.graph leaves its stream current then
    _assert_usable(s)


def test_waiting_on_an_event_recorded_outside_the_capture_raises():
    """CUDA does not let a capturing stream wait on work outside the capture (cudaErrorStreamCaptureIsolation)."""
    outside = torch.openreg.Event()
    outside.record()
    g = _graph()
    with _capturing(g) as s:
        with pytest.raises(RuntimeError, match="capturing"):
            s.wait_event(outside)
        with contextlib.suppress(RuntimeError):
            g.capture_end()
    _assert_usable(s)


def test_capture_on_the_default_stream_raises():
    """CUDA graphs are captured on a side stream: capture_begin on the default stream raises and starts nothing."""
    g = _graph()
    with pytest.raises(RuntimeError, match="default stream"):
        g.capture_begin()
    assert not torch.openreg.is_current_stream_capturing()
    _assert_usable(torch.openreg.default_stream())


# --------------------------------------------------------------------------- capture error modes and threads

MODES = [  # (who synchronizes another stream during the capture, mode, whether it raises)
    ("other_thread", "global", True),
    ("other_thread", "thread_local", False),
    ("other_thread", "relaxed", False),
    ("capturing_thread", "global", True),
    ("capturing_thread", "thread_local", True),
    ("capturing_thread", "relaxed", False),
]


@pytest.mark.parametrize("who, mode, raises", MODES)
def test_capture_error_modes(who, mode, raises):
    """cudaStreamCaptureMode: "global" forbids every thread's synchronizing calls during a capture, "thread_local" only
    the capturing thread's, "relaxed" lets the capturing thread synchronize a stream that is not capturing."""
    other, x, y = torch.openreg.Stream(), torch.zeros(8, device=D), torch.zeros(8, device=D)
    y.add_(0)  # warm-up: a signature's first call runs at the call
    torch.openreg.synchronize()
    errors = []

    def sync_other():
        try:
            with torch.openreg.stream(other):
                y.add_(1)  # an asynchronous launch on a stream that is not capturing: allowed in every mode
        except RuntimeError as e:
            errors.append(("launch", e))
            return
        try:
            other.synchronize()
        except RuntimeError as e:
            errors.append(("synchronize", e))

    g = _graph()
    with _capturing(g, capture_error_mode=mode):
        x.add_(1)
        if who == "other_thread":
            t = threading.Thread(target=sync_other)
            t.start()
            t.join(timeout=60)
            assert not t.is_alive(), "the other thread hung"
        else:
            sync_other()
        assert [step for step, _ in errors] == (["synchronize"] if raises else []), errors
        if raises:
            assert "capturing" in str(errors[0][1])
            with contextlib.suppress(RuntimeError):
                g.capture_end()
        else:
            g.capture_end()
    torch.openreg.synchronize()  # y was written on `other`
    assert_close(y.cpu(), _full(1, 8))
    assert_close(x.cpu(), _full(0, 8))
    if not raises:
        g.replay()
        assert_close(x.cpu(), _full(1, 8))


# --------------------------------------------------------------------------- fork and join


def test_fork_join_captures_the_work_of_a_second_stream():
    """CUDA captures the work of a stream that waits on the capturing stream (fork) and is waited on (join)."""
    a_cpu, b_cpu = _cpu_randn(64, seed=5), _cpu_randn(64, seed=6)
    a, b, counter = a_cpu.to(D), b_cpu.to(D), torch.zeros(3, device=D)
    s2, g = torch.openreg.Stream(), _graph()
    with torch.openreg.graph(g):
        capturing = torch.openreg.current_stream()
        left = a.sin()
        s2.wait_stream(capturing)
        with torch.openreg.stream(s2):
            forked_is_capturing = torch.openreg.is_current_stream_capturing()
            right = b.cos() * 2
            counter.add_(1)
        capturing.wait_stream(s2)
        out = left + right
    assert forked_is_capturing, "a stream forked from the capture is capturing, as on CUDA"
    assert_close(counter.cpu(), _full(0, 3))
    _assert_usable(s2)
    for seed in range(2):
        a_cpu, b_cpu = _cpu_randn(64, seed=20 + seed), _cpu_randn(64, seed=30 + seed)
        a.copy_(a_cpu)
        b.copy_(b_cpu)
        g.replay()
        assert_close(out.cpu(), a_cpu.sin() + b_cpu.cos() * 2)
    assert_close(counter.cpu(), _full(2, 3))


def test_a_fork_not_joined_back_fails_the_capture():
    """cudaErrorStreamCaptureUnjoined: work a stream forked to in the capture must be waited for before it ends."""
    x, capture, s2, g = torch.zeros(4, device=D), torch.openreg.Stream(), torch.openreg.Stream(), _graph()
    with pytest.raises(RuntimeError, match="wait_stream"):
        with torch.openreg.graph(g, stream=capture):  # not the default capture stream, which s2 may be (see _forks)
            s2.wait_stream(torch.openreg.current_stream())
            with torch.openreg.stream(s2):
                x.add_(1)
    _assert_usable(s2)
    with pytest.raises(RuntimeError, match="successful capture"):
        g.replay()


def _forks(join):
    """Two streams forked from the capture, each with work, joined as `join` says; returns whether capture_end()
    accepted it."""
    x, y, g = torch.zeros(4, device=D), torch.zeros(4, device=D), _graph()
    # Three draws in a row from the 32-stream pool are three streams; the default capture stream, drawn once per
    # process, is one of the pool's too (as on CUDA) and would be s2 or s3 every so often.
    capture, s2, s3 = torch.openreg.Stream(), torch.openreg.Stream(), torch.openreg.Stream()
    try:
        with torch.openreg.graph(g, stream=capture):
            capturing = torch.openreg.current_stream()
            s2.wait_stream(capturing)
            s3.wait_stream(capturing)
            with torch.openreg.stream(s2):
                x.add_(1)
            with torch.openreg.stream(s3):
                y.add_(1)
            join(capturing, s2, s3)
    except RuntimeError as e:
        assert "wait_stream" in str(e)
        return False
    finally:
        _assert_usable(s2)
        _assert_usable(s3)
    return True


def test_forks_joined_back_through_one_another_pass_and_otherwise_fail():
    """What CUDA checks at capture end: the capturing stream follows all the forked work, directly or through
    another forked stream; streams that only wait for each other are not joined back."""

    def through_s3(capturing, s2, s3):
        s3.wait_stream(s2)
        capturing.wait_stream(s3)

    def to_each_other(capturing, s2, s3):
        s3.wait_stream(s2)
        s2.wait_stream(s3)

    def s3_joined_before_its_last_work(capturing, s2, s3):
        capturing.wait_stream(s2)
        capturing.wait_stream(s3)
        with torch.openreg.stream(s3):
            torch.zeros(1, device=D).add_(1)

    assert _forks(through_s3)
    assert not _forks(to_each_other)
    assert not _forks(s3_joined_before_its_last_work)


# --------------------------------------------------------------------------- memory pools


def _clean():
    gc.collect()
    torch.openreg.synchronize()
    torch.openreg.empty_cache()
    return torch.openreg.memory_allocated(), torch.openreg.memory_reserved()


@pytest.mark.parametrize("release", ["reset", "del"])
def test_capture_memory_is_accounted_and_released_with_the_graph(release):
    """Capture allocations come from the graph's private pool and count in memory_allocated; once the outputs are
    freed and the graph reset (or deleted), empty_cache returns them, as with CUDA graphs."""
    x = torch.ones(2**18, device=D)
    base = _clean()
    g = _graph()
    with torch.openreg.graph(g):
        tmp = x * 3
        y = tmp + 1
        del tmp
    assert torch.openreg.memory_allocated() >= base[0] + y.nbytes
    g.replay()
    assert_close(y.cpu(), _full(4, 2**18))
    del y
    if release == "reset":
        g.reset()
    else:
        del g
    assert _clean() == base


def test_a_graph_reset_while_its_replay_is_queued_leaves_the_replay_its_memory():
    """As on CUDA, a graph may be reset (and its outputs freed) right after replay(): the queued replay still writes
    into the pool's memory, and work queued after it still reads the outputs."""
    x_cpu = _cpu_randn(2**18, seed=9)
    x, g = x_cpu.to(D), _graph()
    with torch.openreg.graph(g):
        y = (x * 2).sin().exp()  # temporaries freed inside the capture
    y + 1  # warm-up: a signature's first call runs at the call, after the queued work
    side = torch.openreg.current_stream()
    torch.openreg._sleep(100_000_000)  # the replay stays queued while the graph goes
    g.replay()
    g.reset()
    z = y + 1
    del y
    assert not side.query(), "the replay ran before the graph was reset: this test checks nothing"
    torch.openreg.empty_cache()
    assert_close(z.cpu(), (x_cpu * 2).sin().exp() + 1)


def test_memory_freed_during_capture_is_not_given_to_eager_tensors():
    """A graph's private pool is kept for its replays: memory freed inside the capture never backs an eager tensor
    allocated afterwards, so replays cannot overwrite eager data."""
    x_cpu = _cpu_randn(2**16, seed=7)
    x, g = x_cpu.to(D), _graph()
    with torch.openreg.graph(g):
        y = (x * 3).sin().mul(2).add(1).exp()  # each step frees a temporary the size of x
    eager = [torch.full_like(x, -7.0) for _ in range(8)]
    torch.openreg.synchronize()
    g.replay()
    g.replay()
    assert_close(y.cpu(), (x_cpu * 3).sin().mul(2).add(1).exp())
    for i, t in enumerate(eager):
        assert_close(t.cpu(), torch.full_like(x_cpu, -7.0), msg=f"eager tensor {i} was overwritten by a replay")


def test_graphs_sharing_a_pool_chain_like_the_cpu():
    """graph_pool_handle() and g.pool() let graphs share one pool (CUDA docs, "Sharing memory across captures");
    replayed in capture order, the chain computes what the CPU computes."""
    handle = torch.openreg.graph_pool_handle()
    assert isinstance(handle, tuple) and len(handle) == 2 and all(isinstance(v, int) for v in handle)
    assert torch.openreg.graph_pool_handle() != handle
    w_cpu = _cpu_randn(8, 8, seed=8)
    w, x = w_cpu.to(D), torch.zeros(4, 8, device=D)
    g1, g2, alone = _graph(), _graph(), _graph()
    with torch.openreg.graph(g1, pool=handle):
        h = (x @ w).relu()
    with torch.openreg.graph(g2, pool=g1.pool()):
        out = h * 2 + x.sum(1, keepdim=True)
    with torch.openreg.graph(alone):
        x.abs()
    for seed in range(3):
        x_cpu = _cpu_randn(4, 8, seed=40 + seed)
        x.copy_(x_cpu)
        g1.replay()
        g2.replay()
        assert_close(out.cpu(), (x_cpu @ w_cpu).relu() * 2 + x_cpu.sum(1, keepdim=True))
    assert alone.pool() != g1.pool()
    assert (g1.pool(), g2.pool()) == (handle, handle), "CUDAGraph.pool() is the pool given to capture_begin"


# --------------------------------------------------------------------------- random numbers


def test_random_ops_draw_fresh_numbers_on_each_replay():
    """CUDA graphs register the generator: every replay of captured torch.rand and dropout draws new numbers."""
    n, g = 20000, _graph()
    ones = torch.ones(n, device=D)
    with torch.openreg.graph(g):
        r = torch.rand(n, device=D)
        d = F.dropout(ones, p=0.5, training=True)
    draws = []
    for _ in range(2):
        g.replay()
        draws.append((r.cpu(), d.cpu()))
    (r1, d1), (r2, d2) = draws
    assert not torch.equal(r1, r2) and not torch.equal(d1, d2), "two replays drew the same numbers"
    for r_, d_ in draws:
        assert 0 <= r_.min() and r_.max() < 1 and abs(r_.mean().item() - 0.5) < 0.02
        kept = d_ != 0
        assert torch.all(d_[kept] == 2.0) and abs(kept.float().mean().item() - 0.5) < 0.03


def test_generator_state_saved_before_a_replay_replays_its_numbers():
    """As with CUDA graphs' registered generators: get_rng_state/set_rng_state around replays reproduce the draws, and
    eager draws after a replay continue from the state the replay left."""
    g = _graph()
    with torch.openreg.graph(g):
        r = torch.rand(64, device=D)
    state = torch.openreg.get_rng_state()
    g.replay()
    first, eager_after = r.cpu(), torch.rand(8, device=D).cpu()
    torch.openreg.set_rng_state(state)
    g.replay()
    assert_close(r.cpu(), first, atol=0, rtol=0)
    assert_close(torch.rand(8, device=D).cpu(), eager_after, atol=0, rtol=0)


def _dropout_chain(x, n):
    for _ in range(n):
        x = F.dropout(x, p=0.1)
    return x


def test_a_capture_leaves_the_generator_alone_so_replays_and_eager_draws_interleave_as_one_sequence():
    """As CUDA graphs: capturing draws nothing (the offset stays), each replay takes the next numbers, so two
    dropouts replayed, two run eagerly and two replayed again draw what six eager ones draw."""
    a = torch.randn(10000, device=D)
    torch.openreg.manual_seed(5)
    eager = _dropout_chain(a, 6)
    graphed, g = a.clone(), _graph()
    torch.openreg.manual_seed(5)
    offset = torch.openreg.default_generators[0].get_offset()
    with _capturing(g):
        out = _dropout_chain(graphed, 2)
        g.capture_end()
    assert torch.openreg.default_generators[0].get_offset() == offset
    g.replay()
    graphed.copy_(_dropout_chain(out, 2))
    g.replay()
    assert torch.equal(out.cpu(), eager.cpu())


def test_checkpoint_recomputes_the_forwards_numbers_in_a_captured_graph():
    """As CUDA's graph-safe offsets: during a capture the generator's state is the capture's relative offset, so
    checkpoint's saved and restored state makes the recompute draw the forward's numbers at every replay, and the
    graph's gradient is the eager one (PyTorch's test_cuda.py::test_graph_checkpoint_preserve_rng_state)."""
    def fn(x):
        return x * torch.sigmoid(torch.randn(1, device=D))

    def grad():
        x = torch.ones(1, device=D, requires_grad=True)
        out = torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False, preserve_rng_state=True)
        return torch.autograd.grad(out, x)[0]

    fn(torch.ones(1, device=D))
    torch.openreg.manual_seed(42)
    eager = grad().cpu()
    g = _graph()
    with torch.openreg.graph(g):
        graphed = grad()
    torch.openreg.manual_seed(42)
    g.replay()
    assert torch.equal(graphed.cpu(), eager)


def _draws_switching_states(gen, first, second):
    """Five numbers from `second`'s state, then twice five from `first`'s, through one generator."""
    gen.graphsafe_set_state(second)
    out = [torch.rand(5, device=D, generator=gen)]
    gen.graphsafe_set_state(first)
    out += [torch.rand(5, device=D, generator=gen) for _ in range(2)]
    return out


def test_graphsafe_generator_states_replay_what_eager_draws():
    """As CUDA's: graphsafe_get_state() shares a generator's state, clone_state() copies it, graphsafe_set_state()
    switches; a graph that switches states draws at each replay what the same code draws eagerly."""
    def states():
        gen = torch.Generator(device=D).manual_seed(0)
        return gen, gen.graphsafe_get_state(), gen.clone_state()

    eager_gen, eager_first, eager_second = states()
    eager = [torch.stack(_draws_switching_states(eager_gen, eager_first, eager_second)) for _ in range(2)]
    gen, first, second = states()
    g = _graph()
    g.register_generator_state(first)
    g.register_generator_state(second)
    with torch.openreg.graph(g):
        out = _draws_switching_states(gen, first, second)
    for want in eager:
        g.replay()
        assert torch.equal(torch.stack(out).cpu(), want.cpu())
    with pytest.raises(TypeError, match="takes an openreg generator"):
        g.register_generator_state(torch.Generator())


def test_a_capture_draws_only_from_registered_generator_states():
    """CUDA's rule: a capture draws from its device's default generator and from the states registered with its
    graph (before capture_begin); any other draw is refused at the call, the capture goes on, and a registered
    generator's replays draw what the same generator draws eagerly, each replay the next numbers."""
    def seeded():
        return torch.Generator(device=D).manual_seed(11)

    twin = seeded()
    eager = [torch.rand(6, device=D, generator=twin).cpu() for _ in range(3)]
    gen, stranger, g = seeded(), seeded(), _graph()
    g.register_generator_state(gen)
    with _capturing(g) as stream:
        out = torch.rand(6, device=D, generator=gen)
        with pytest.raises(RuntimeError, match="generator not in capture mode.*register_generator_state"):
            torch.rand(6, device=D, generator=stranger)
        default = torch.rand(6, device=D)
        with pytest.raises(RuntimeError, match="Cannot register the state during capturing stage"):
            g.register_generator_state(stranger)
        g.capture_end()
    _assert_usable(stream)
    assert stranger.get_offset() == 0  # the refused draw took nothing
    for want in eager[:2]:
        g.replay()
        assert torch.equal(out.cpu(), want)
    assert torch.equal(torch.rand(6, device=D, generator=gen).cpu(), eager[2])
    first = default.cpu()
    g.replay()
    assert not torch.equal(default.cpu(), first)


def test_a_plain_accelerator_graph_registers_the_default_generator():
    """torch.accelerator.Graph, without openreg's Python class, draws from the default generator as CUDA's does."""
    g = torch.accelerator.Graph()
    with torch.openreg.stream(torch.openreg.Stream()):
        g.capture_begin()
        r = torch.rand(8, device=D)
        g.capture_end()
    g.replay()
    first = r.cpu()
    g.replay()
    assert not torch.equal(r.cpu(), first)


def test_seeding_during_a_capture_may_only_repeat_the_seed():
    """CUDA's rule: the replays take the offset, so a new seed mid-capture is refused; the same seed changes
    nothing."""
    gen = torch.openreg.default_generators[0]
    torch.openreg.manual_seed(3)
    torch.rand(4, device=D)
    offset = gen.get_offset()
    with _capturing(_graph()) as stream:
        torch.rand(4, device=D)
        torch.openreg.manual_seed(3)
        assert gen.get_offset() == 4  # the capture's own, relative to each replay's, which seeding leaves alone
        with pytest.raises(RuntimeError, match=r"only if new seed is the same as the original seed \(3; got 4\)"):
            torch.openreg.manual_seed(4)
        assert torch.openreg.initial_seed() == 3
    _assert_usable(stream)
    assert gen.get_offset() == offset


def test_fused_attention_with_dropout_is_captured_and_draws_fresh_masks():
    """openreg's fused attention seeds a generator of its own for its dropout mask, which the rule above must not
    refuse; each replay draws a new mask, forward and backward."""
    q = torch.randn(1, 2, 4, 8, device=D, requires_grad=True)
    F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).sum().backward()  # outside the capture first
    g = _graph()
    with torch.openreg.graph(g):
        out = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
        out.sum().backward()
    draws = []
    for _ in range(2):
        g.replay()
        draws.append((out.cpu(), q.grad.cpu()))
    assert not torch.equal(draws[0][0], draws[1][0])


def test_a_capturing_stream_says_so():
    """torch.Stream.is_capturing(), which device-generic code (torch.accelerator) reads, as CUDA's."""
    stream, other, g = torch.openreg.Stream(), torch.openreg.Stream(), _graph()
    assert not stream.is_capturing()
    with _capturing(g, stream):
        assert stream.is_capturing() and torch.accelerator.current_stream().is_capturing()
        assert not other.is_capturing()
        g.capture_end()
    assert not stream.is_capturing()


# --------------------------------------------------------------------------- whole-network capture

OPTIMIZERS = {  # name -> (optimizer of the CPU reference, optimizer of the graphed model)
    "sgd": (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),) * 2,
    "adam": (lambda p: torch.optim.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01, capturable=True)),
    # The fused steps torch has no meta kernel for, captured as CUDA captures them.
    "sgd_fused": (lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                  lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, fused=True)),
    "adagrad_fused": (lambda p: torch.optim.Adagrad(p, lr=0.1), lambda p: torch.optim.Adagrad(p, lr=0.1, fused=True)),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_whole_network_capture_trains_like_the_cpu(name):
    """The whole-network recipe of PyTorch's CUDA graphs docs (side-stream warm-up, capture of forward, backward and
    optimizer.step(), copy into static inputs and replay) gives the losses and parameters of eager CPU training."""
    warmup, tol = 3, dict(atol=1e-4, rtol=1e-4)
    torch.manual_seed(0)
    cpu_model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    model = copy.deepcopy(cpu_model).to(D)
    cpu_opt, opt = OPTIMIZERS[name][0](cpu_model.parameters()), OPTIMIZERS[name][1](model.parameters())
    loss_fn = nn.MSELoss()
    batches = [(_cpu_randn(8, 16, seed=i), _cpu_randn(8, 4, seed=50 + i)) for i in range(warmup + 4)]

    def step(model, opt, x, t):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), t)
        loss.backward()
        opt.step()
        return loss.detach().cpu()

    cpu_losses = [step(cpu_model, cpu_opt, x, t) for x, t in batches[:warmup]]
    after_warmup = [p.detach().clone() for p in cpu_model.parameters()]
    cpu_losses += [step(cpu_model, cpu_opt, x, t) for x, t in batches[warmup:]]

    static_x, static_t, losses = torch.zeros(8, 16, device=D), torch.zeros(8, 4, device=D), []
    side = torch.openreg.Stream()
    side.wait_stream(torch.openreg.current_stream())
    with torch.openreg.stream(side):
        for x, t in batches[:warmup]:
            static_x.copy_(x)
            static_t.copy_(t)
            losses.append(step(model, opt, static_x, static_t))
    torch.openreg.current_stream().wait_stream(side)
    g = _graph()
    opt.zero_grad(set_to_none=True)
    with torch.openreg.graph(g):
        static_loss = loss_fn(model(static_x), static_t)
        static_loss.backward()
        opt.step()
    assert_close([p.detach().cpu() for p in model.parameters()], after_warmup, **tol, msg="the capture ran a step")
    for x, t in batches[warmup:]:
        static_x.copy_(x)
        static_t.copy_(t)
        g.replay()
        losses.append(static_loss.detach().cpu())
    assert_close(torch.stack(losses), torch.stack(cpu_losses), **tol)
    assert_close([p.detach().cpu() for p in model.parameters()], [p.detach() for p in cpu_model.parameters()], **tol)


def test_make_graphed_callables_trains_like_the_cpu():
    """torch.cuda.make_graphed_callables' contract: a module and a function, each replaying one forward and one backward
    graph, give the CPU's outputs and gradients (of inputs and parameters) step after step."""
    torch.manual_seed(0)
    cpu_module = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
    module = copy.deepcopy(cpu_module).to(D)

    def head(h):
        return (h * h).sum(dim=1, keepdim=True)

    sample = (torch.zeros(4, 8, device=D, requires_grad=True), torch.zeros(4, 16, device=D, requires_grad=True))
    graphed_module, graphed_head = torch.openreg.make_graphed_callables((module, head), ((sample[0],), (sample[1],)))
    opt, cpu_opt = torch.optim.SGD(module.parameters(), lr=0.1), torch.optim.SGD(cpu_module.parameters(), lr=0.1)
    for seed in range(3):
        x_cpu = _cpu_randn(4, 8, seed=60 + seed).requires_grad_()
        x = x_cpu.detach().to(D).requires_grad_()
        out, cpu_out = graphed_head(graphed_module(x)), head(cpu_module(x_cpu))
        out.sum().backward()
        cpu_out.sum().backward()
        assert_close(out.detach().cpu(), cpu_out.detach())
        assert_close(x.grad.cpu(), x_cpu.grad)
        opt.step()
        cpu_opt.step()
        opt.zero_grad()
        cpu_opt.zero_grad()
    assert_close([p.detach().cpu() for p in module.parameters()], [p.detach() for p in cpu_module.parameters()])


# --------------------------------------------------------------------------- torch.accelerator.Graph and debug_dump


def test_accelerator_graph_captures_and_replays_on_openreg():
    """torch.accelerator.Graph, the device-generic CUDAGraph, captures and replays with openreg as the accelerator."""
    assert torch.accelerator.current_accelerator().type == "openreg"
    assert issubclass(torch.openreg.OpenRegGraph, torch.accelerator.Graph)
    x, g, s = torch.zeros(2000, device=D), torch.accelerator.Graph(), torch.Stream("openreg")
    with s, g:
        x += 1
    assert_close(x.cpu(), _full(0, 2000))
    g.replay()
    g.replay()
    assert_close(x.cpu(), _full(2, 2000))
    shared = torch.accelerator.Graph(pool=g.pool(), capture_error_mode="thread_local")
    with s, shared:
        y = x * 2
    shared.replay()
    assert_close(y.cpu(), _full(4, 2000))


def test_debug_dump_needs_debug_mode(tmp_path):
    """debug_dump of a graph captured without enable_debug_mode() warns and writes nothing, as CUDAGraph's does."""
    x, g = torch.ones(8, device=D), _graph()
    with torch.openreg.graph(g):
        x.add_(1)
    with pytest.warns(UserWarning, match="enable_debug_mode"):
        g.debug_dump(str(tmp_path / "graph.txt"))
    assert not (tmp_path / "graph.txt").exists()


def test_debug_dump_lists_the_captured_ops(tmp_path):
    """CUDAGraph.debug_dump after enable_debug_mode: a readable listing of the captured work in capture order, and of
    nothing run outside the capture."""
    x = torch.ones(8, device=D)
    x.sin()
    g = _graph()
    g.enable_debug_mode()
    with torch.openreg.graph(g):
        z = (x + 1) * 2
    g.debug_dump(str(tmp_path / "graph.txt"))
    text = (tmp_path / "graph.txt").read_text()
    lines = text.splitlines()
    adds = [i for i, line in enumerate(lines) if "aten::add" in line]
    muls = [i for i, line in enumerate(lines) if "aten::mul" in line]
    assert adds and muls and adds[0] < muls[0] and "aten::sin" not in text, text
    g.replay()
    assert_close(z.cpu(), _full(4, 8))
