"""What each rank runs in the distributed tests, and how the tests start the ranks. Spawned processes import
this module by name, so it holds every function a rank runs."""

from __future__ import annotations

import contextlib
import os
import socket
import time
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(fn, *args, env: dict[str, str] | None = None) -> None:
    """Runs fn(rank, *args) on WORLD spawned ranks, each with its own openreg device (LOCAL_RANK's)."""
    port = free_port()
    saved = dict(os.environ)
    # The environment is read when each rank imports torch (OPENREG_STRICT, ...), so it is set before spawning.
    os.environ.update(env or {})
    try:
        mp.spawn(_rank_main, args=(fn, port, args), nprocs=WORLD)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _rank_main(rank: int, fn, port: int, args) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD),
                      LOCAL_RANK=str(rank))
    torch.openreg.set_device(int(os.environ["LOCAL_RANK"]))
    # torch 2.13 renames all_gather_into_tensor and reduce_scatter_tensor (*_single); the tests call both.
    warnings.filterwarnings("ignore", r".*is deprecated. Please use `torch.distributed.\w+_single`", FutureWarning)
    fn(rank, *args)


@contextlib.contextmanager
def group(backend: str | None = "cpu:gloo,openreg:orccl", timeout: float = 60):
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout))
    try:
        yield
    finally:
        dist.destroy_process_group()


def same(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(a.cpu(), b.cpu(), rtol=1e-6, atol=1e-6, msg=lambda m: f"{what}: {m}")


# --- every collective: on openreg tensors (orccl) and on CPU tensors (gloo) in one process group -----------------


def _values(rank: int, dtype: torch.dtype, n: int = 6) -> torch.Tensor:
    return (torch.arange(n) * (rank + 2) + rank).to(dtype)


def _both(fn, *tensors):
    """Runs fn on CPU copies (gloo) and on openreg copies (orccl); returns both argument lists after the call."""
    cpu = [t.clone() if isinstance(t, torch.Tensor) else [x.clone() for x in t] for t in tensors]
    dev = [t.to("openreg") if isinstance(t, torch.Tensor) else [x.to("openreg") for x in t] for t in tensors]
    fn(*cpu)
    fn(*dev)
    return cpu, dev


def _compare(name, cpu, dev) -> None:
    for i, (c, d) in enumerate(zip(cpu, dev, strict=True)):
        if isinstance(c, torch.Tensor):
            assert d.device.type == "openreg", f"{name}: argument {i} left the device"
            same(c, d, f"{name} argument {i}")
        else:
            for j, (cj, dj) in enumerate(zip(c, d, strict=True)):
                assert dj.device.type == "openreg", f"{name}: argument {i}[{j}] left the device"
                same(cj, dj, f"{name} argument {i}[{j}]")


def _collectives_in(dtype: torch.dtype, rank: int, world: int) -> None:
    """Every collective on `dtype` tensors, against gloo on CPU copies."""
    x = _values(rank, dtype)
    ops = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
    if not dtype.is_floating_point:
        ops += [dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR]
    for op in ops:
        _compare(f"all_reduce {op} {dtype}", *_both(lambda t, op=op: dist.all_reduce(t, op=op), x))
        _compare(f"reduce {op} {dtype}", *_both(lambda t, op=op: dist.reduce(t, dst=1, op=op), x))
    _compare("broadcast", *_both(lambda t: dist.broadcast(t, src=1), x))
    outs = [torch.empty_like(x) for _ in range(world)]
    _compare("all_gather", *_both(lambda o, t: dist.all_gather(o, t), outs, x))
    _compare("all_gather_into_tensor",
             *_both(dist.all_gather_into_tensor, torch.empty(world * 6, dtype=dtype), x))
    chunks = [_values(rank + 3 * i, dtype) for i in range(world)]
    _compare("reduce_scatter", *_both(dist.reduce_scatter, torch.empty_like(x), chunks))
    _compare("reduce_scatter_tensor",
             *_both(dist.reduce_scatter_tensor, torch.empty(3, dtype=dtype), x))
    if hasattr(dist, "all_gather_single"):  # torch >= 2.13's names for the two above
        _compare("all_gather_single", *_both(dist.all_gather_single, torch.empty(world * 6, dtype=dtype), x))
        _compare("reduce_scatter_single",
                 *_both(dist.reduce_scatter_single, torch.empty(3, dtype=dtype), x))
    _compare("all_to_all", *_both(dist.all_to_all, [torch.empty(2, dtype=dtype) for _ in range(world)],
                                  [_values(rank, dtype, 2) + i for i in range(world)]))
    # Uneven splits: rank r sends r + 1 + i elements to rank i.
    send = [rank + 1 + i for i in range(world)]
    recv = [r + 1 + rank for r in range(world)]
    _compare("all_to_all_single uneven",
             *_both(lambda o, t: dist.all_to_all_single(o, t, output_split_sizes=recv,
                                                         input_split_sizes=send),
                    torch.empty(sum(recv), dtype=dtype), _values(rank, dtype, sum(send))))
    gathered = [torch.empty_like(x) for _ in range(world)] if rank == 0 else None
    _compare("gather", *_both(lambda t, g: dist.gather(t, g or None, dst=0), x, gathered or []))
    pieces = [_values(i, dtype) for i in range(world)] if rank == 1 else []
    _compare("scatter", *_both(lambda o, p: dist.scatter(o, p or None, src=1), torch.empty_like(x), pieces))
    peer = 1 - rank
    if rank == 0:
        _compare("send", *_both(lambda t: dist.send(t, peer), x))
    else:
        _compare("recv", *_both(lambda t: dist.recv(t, peer), torch.empty_like(x)))

    def exchange(out, t):
        for w in [dist.isend(t, peer), dist.irecv(out, peer)]:
            w.wait()

    _compare("isend/irecv", *_both(exchange, torch.empty_like(x), x))

    def batch(out, t):
        ops = [dist.P2POp(dist.isend, t, peer), dist.P2POp(dist.irecv, out, peer)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()

    _compare("batch_isend_irecv", *_both(batch, torch.empty_like(x), x))


def collectives(rank: int) -> None:
    with group():
        world = dist.get_world_size()
        for dtype in (torch.float32, torch.int64):
            _collectives_in(dtype, rank, world)

        # AVG and PREMUL_SUM are NCCL's (FSDP2 asks for them); gloo has neither: compare with SUM then scaling.
        x = _values(rank, torch.float32).to("openreg")
        avg, premul, total = x.clone(), x.clone(), _values(0, torch.float32) + _values(1, torch.float32)
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        dist.all_reduce(premul, op=dist._make_nccl_premul_sum(0.25))
        same(avg, total / world, "all_reduce AVG")
        same(premul, total * 0.25, "all_reduce PREMUL_SUM")
        ints = _values(rank, torch.int64).to("openreg")
        dist.all_reduce(ints, op=dist.ReduceOp.AVG)
        same(ints, torch.div(_values(0, torch.int64) + _values(1, torch.int64), world, rounding_mode="trunc"),
             "integer all_reduce AVG")

        # The object helpers run over the accelerator's backend, orccl.
        objs = [None] * world
        dist.all_gather_object(objs, {"rank": rank})
        assert objs == [{"rank": r} for r in range(world)], objs
        bcast = [f"from {rank}"]
        dist.broadcast_object_list(bcast, src=1)
        assert bcast == ["from 1"], bcast
        got = [None] * world if rank == 0 else None
        dist.gather_object(("g", rank), got, dst=0)
        assert rank != 0 or got == [("g", 0), ("g", 1)], got
        out = [None]
        dist.scatter_object_list(out, [["s", r] for r in range(world)] if rank == 0 else None, src=0)
        assert out == [["s", rank]], out

        # Subgroups: one group of both ranks and one per rank.
        both = dist.new_group([0, 1])
        t = torch.ones(3, device="openreg") * (rank + 1)
        dist.all_reduce(t, group=both)
        same(t, torch.full((3,), 3.0), "all_reduce in new_group([0, 1])")
        alone = [dist.new_group([r]) for r in range(world)]
        t = torch.ones(3, device="openreg") * (rank + 1)
        dist.all_reduce(t, group=alone[rank])
        same(t, torch.full((3,), rank + 1.0), "all_reduce in a group of one")
        dist.barrier()


# --- stream semantics: NCCL's ------------------------------------------------------------------------------------


def streams(rank: int) -> None:
    with group(None):  # no backend named: c10d picks the accelerator's, orccl
        assert dist.get_backend_config() == "openreg:orccl", dist.get_backend_config()
        world = dist.get_world_size()
        expected = sum(r + 1.0 for r in range(world))

        # The collective reads what the current stream queued before it, even if the stream has not run it yet.
        t = torch.zeros(1000, device="openreg")
        torch.openreg._sleep(300_000_000)
        t.fill_(rank + 1)
        start = time.perf_counter()
        work = dist.all_reduce(t, async_op=True)
        work.wait()  # the current stream waits; the host does not
        queued = time.perf_counter() - start
        assert queued < 0.2, f"all_reduce(async_op=True) + wait() blocked the host for {queued:.3f} s"
        assert not work.is_completed(), "the collective finished before the work queued ahead of it"
        after = t * 2  # queued after wait(): sees the reduced values
        same(after, torch.full((1000,), 2 * expected), "work queued after wait()")
        assert work.is_completed()

        # Blocking form: later work on the current stream sees the result without any host synchronization.
        u = torch.full((8,), float(rank + 1), device="openreg")
        dist.all_reduce(u)
        u.add_(1)
        same(u, torch.full((8,), expected + 1), "all_reduce then add_")

        # The future: its value is the outputs, and callbacks run after the collective.
        v = torch.full((4,), float(rank + 1), device="openreg")
        torch.openreg._sleep(100_000_000)
        fut = dist.all_reduce(v, async_op=True).get_future()
        doubled = fut.then(lambda f: f.value()[0] * 2)
        same(doubled.wait(), torch.full((4,), 2 * expected), "get_future().then(...)")
        same(fut.wait()[0], torch.full((4,), expected), "get_future().wait()")

        # Work on another stream, joined by wait_stream, is what the collective reads.
        side = torch.openreg.Stream()
        w = torch.zeros(16, device="openreg")
        side.wait_stream(torch.openreg.current_stream())  # the zeros first (the stream sanitizer found this missing)
        with torch.openreg.stream(side):
            torch.openreg._sleep(100_000_000)
            w.fill_(rank + 1)
        torch.openreg.current_stream().wait_stream(side)
        dist.all_reduce(w)
        same(w, torch.full((16,), expected), "all_reduce after wait_stream(side)")

        # A tensor freed while its collective is still queued (here the input of an async all_gather, which its
        # Work does not keep): its memory is not reused before the collective has read it (NCCL's record_stream), so
        # a tensor allocated meanwhile neither changes what is gathered nor is changed by it.
        for _ in range(3):
            outs = [torch.empty(1024, device="openreg") for _ in range(world)]
            torch.openreg._sleep(50_000_000)
            work = dist.all_gather(outs, torch.full((1024,), rank + 1.0, device="openreg"), async_op=True)
            meanwhile = torch.full((1024,), -1.0, device="openreg")
            work.wait()
            for r, out in enumerate(outs):
                same(out, torch.full((1024,), r + 1.0), "all_gather of a freed input")
            same(meanwhile, torch.full((1024,), -1.0), "a tensor allocated while the all_gather was queued")

        # A barrier waits on the host, as NCCL's does, and the device keeps working after it.
        dist.barrier()
        same(torch.ones(2, device="openreg") + 1, torch.full((2,), 2.0), "device after barrier")


# --- bad input and faults ----------------------------------------------------------------------------------------


def _raises(exc: type[BaseException], words: list[str], fn) -> BaseException:
    try:
        fn()
    except exc as e:
        for w in words:
            assert w in str(e), f"{w!r} not in the error: {e}"
        return e
    raise AssertionError(f"no {exc.__name__} raised")


def bad_input(rank: int) -> None:
    with group():
        world = dist.get_world_size()
        outs = [torch.empty(4, device="openreg") for _ in range(world)]
        _raises(ValueError, [f"rank {rank}", "on cpu", "openreg tensors", "cpu:gloo,openreg:orccl"],
                lambda: dist.all_gather([torch.empty(4) for _ in range(world)], torch.ones(4, device="openreg")))
        other = torch.ones(4, device=f"openreg:{1 - rank}")
        _raises(ValueError, [f"rank {rank}", f"openreg:{rank}", f"openreg:{1 - rank}", "one device"],
                lambda: dist.all_gather(outs, other))
        _raises(ValueError, [f"rank {rank}", "not a contiguous", ".contiguous()"],
                lambda: dist.all_reduce(torch.ones(4, 3, device="openreg").t()))

        # Ranks that pass different shapes: every rank gets the error, naming what each passed, at its next
        # synchronization (gloo alone would abort the process); the device stays usable.
        t = torch.ones(4 + rank, device="openreg")
        dist.all_reduce(t)
        e = _raises(ValueError, ["all_reduce", f"on rank {rank}",
                                 "rank 0: ALLREDUCE (SUM) of a float32 tensor of shape [4]",
                                 "rank 1: ALLREDUCE (SUM) of a float32 tensor of shape [5]"], t.cpu)
        assert "failed asynchronously" in str(e), e
        # ...and ranks calling different collectives.
        if rank == 0:
            dist.broadcast(torch.ones(2, device="openreg"), src=0)
        else:
            dist.all_reduce(torch.ones(2, device="openreg"))
        _raises(ValueError, ["BROADCAST", "ALLREDUCE"], torch.openreg.synchronize)
        u = torch.full((3,), rank + 1.0, device="openreg")
        dist.all_reduce(u)
        same(u, torch.full((3,), 3.0), "all_reduce after the mismatches")


def absent_peer(rank: int) -> None:
    """Rank 1 never calls the collective (and then dies); rank 0 gets an error within the timeout, not a hang."""
    dist.init_process_group(None, timeout=timedelta(seconds=3))
    if rank == 1:
        time.sleep(6)
        os._exit(0)  # dies without a word to the others
    start = time.perf_counter()
    t = torch.ones(4, device="openreg")
    dist.all_reduce(t)
    _raises(dist.DistBackendError, ["orccl::all_reduce", "failed asynchronously"], t.cpu)
    waited = time.perf_counter() - start
    assert waited < 10, f"the error came after {waited:.1f} s, past the 3 s timeout"
    dist.destroy_process_group()


# --- parallelism APIs: each trains to the weights single-process CPU training on the full batch reaches ----------

STEPS = 4


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4 * WORLD, 8, generator=g), torch.randn(4 * WORLD, 4, generator=g)) for _ in range(STEPS)]


def _reference() -> torch.nn.Module:
    """Single-process training on the CPU, on the full batches."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in _batches():
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return model


def _train(model: torch.nn.Module, rank: int, to_input=lambda t: t.to("openreg")) -> None:
    """Each rank trains on its share of every batch (the mean loss over equal shares averages to the full one)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in _batches():
        share = slice(4 * rank, 4 * (rank + 1))
        torch.nn.functional.mse_loss(model(to_input(x[share])), to_input(y[share])).backward()
        opt.step()
        opt.zero_grad()


def _same_weights(trained: dict[str, torch.Tensor], what: str) -> None:
    for name, expected in _reference().state_dict().items():
        torch.testing.assert_close(trained[name].cpu(), expected, rtol=1e-5, atol=1e-6,
                                   msg=lambda m, name=name: f"{what}, {name}: {m}")


def ddp(rank: int) -> None:
    from torch.nn.parallel import DistributedDataParallel

    with group(None):
        model = DistributedDataParallel(_model().to("openreg"))
        model._set_ddp_runtime_logging_sample_rate(2)
        _train(model, rank)
        _same_weights(model.module.state_dict(), "DDP")
        # DDP times its iterations with openreg's timing events, as with CUDA's.
        logged = model._get_ddp_logging_data()
        for key in ("avg_forward_compute_time", "avg_backward_compute_time", "avg_backward_comm_time"):
            assert logged.get(key, 0) > 0, (key, logged)


def fsdp_and_checkpoint(rank: int, checkpoint_dir: str) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    with group(None):
        mesh = init_device_mesh("openreg", (WORLD,))
        model = _model().to("openreg")
        for layer in (model[0], model[2]):
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        _train(model, rank)
        full = {k: v.full_tensor() for k, v in model.state_dict().items()}
        _same_weights(full, "FSDP2")

        # Distributed checkpoint: save the sharded model, load it into a fresh one, which then holds the same.
        dcp.save(get_model_state_dict(model), checkpoint_id=checkpoint_dir)
        fresh = _model()
        torch.nn.init.zeros_(fresh[0].weight)
        fresh = fresh.to("openreg")
        for layer in (fresh[0], fresh[2]):
            fully_shard(layer, mesh=mesh)
        fully_shard(fresh, mesh=mesh)
        state = get_model_state_dict(fresh)
        dcp.load(state, checkpoint_id=checkpoint_dir)
        set_model_state_dict(fresh, state)
        _same_weights({k: v.full_tensor() for k, v in fresh.state_dict().items()}, "FSDP2 after a DCP round trip")


def tensor_parallel(rank: int) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    with group(None):
        mesh = init_device_mesh("openreg", (WORLD,))
        full = torch.arange(24.0).reshape(6, 4)
        sharded = distribute_tensor(full, mesh, [Shard(0)])
        assert sharded.to_local().device.type == "openreg"
        same(sharded.to_local(), full[3 * rank:3 * (rank + 1)], "distribute_tensor Shard(0)")
        same(sharded.redistribute(mesh, [Replicate()]).to_local(), full, "redistribute to Replicate")
        same(sharded.redistribute(mesh, [Shard(1)]).to_local(), full[:, 2 * rank:2 * (rank + 1)],
             "redistribute to Shard(1)")
        same((sharded * 2).full_tensor(), full * 2, "DTensor op then full_tensor")

        # Tensor parallelism: every rank sees the full batch; the layers are split column- then row-wise.
        model = parallelize_module(_model().to("openreg"), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in _batches():
            torch.nn.functional.mse_loss(model(x.to("openreg")), y.to("openreg")).backward()
            opt.step()
            opt.zero_grad()
        _same_weights({k: v.full_tensor() for k, v in model.state_dict().items()}, "tensor parallel")
        _dtensor_random(mesh)


def _dtensor_random(mesh) -> None:
    """DTensor's random ops move the generator's (seed, offset) state, CUDA's Philox state: each shard draws its own
    numbers, the same seed draws them again, and a replicated tensor draws the same numbers on every rank."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor, rand

    draws = []
    for _ in range(2):
        torch.manual_seed(0)
        draws.append(rand(6, 4, device_mesh=mesh, placements=[Shard(0)]).full_tensor())
    same(draws[0], draws[1], "DTensor rand from the same seed")
    assert not torch.equal(draws[0][:3], draws[0][3:]), "both shards drew the same numbers"
    mask = torch.nn.functional.dropout(distribute_tensor(torch.ones(64), mesh, [Replicate()]), 0.5).to_local()
    masks = [torch.empty_like(mask) for _ in range(WORLD)]
    dist.all_gather(masks, mask)
    same(masks[0], masks[1], "dropout of a replicated DTensor on both ranks")


# --- lifecycle ---------------------------------------------------------------------------------------------------


def _threads() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def lifecycle(rank: int, ports: list[int]) -> None:
    """Named explicitly, or in a device map; destroyed and created again in one process, leaking nothing."""
    counts = []
    for port, backend in zip(ports, ["orccl", "cpu:gloo,openreg:orccl", "orccl"], strict=True):
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
        t = torch.full((5,), rank + 1.0, device="openreg")
        dist.all_reduce(t)
        same(t, torch.full((5,), 3.0), f"all_reduce with backend {backend!r}")
        # monitored_barrier is gloo's (it reports which rank is missing): a gloo group gives it, as with NCCL.
        dist.monitored_barrier(dist.new_group(backend="gloo"), timeout=timedelta(seconds=30))
        dist.destroy_process_group()
        assert not dist.is_initialized()
        del t
        counts.append(_threads())
    assert torch.openreg.memory_allocated() == 0, torch.openreg.memory_allocated()
    assert counts[2] <= counts[1], f"threads after each destroy_process_group: {counts}"
