"""The distributed suite (issue 19): collectives and DDP on openreg (orccl) against gloo on CPU tensors, side by
side in one two-rank process group ("cpu:gloo,openreg:orccl"). This process is rank 0 and times; a peer process,
rank 1, runs the same statements the same number of times (every case has a fixed number of runs), so that each
collective has its partner."""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys

import torch

from .harness import Case, Suite, mlp

RUNS = 20
MB16 = 4 * 1024 * 1024  # float32 elements


def _setup(rank: int, port: int) -> dict:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.openreg.set_device(rank)
    dist.init_process_group("cpu:gloo,openreg:orccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    torch.manual_seed(0)
    model_cpu = mlp()
    model = mlp().to("openreg")
    model.load_state_dict(model_cpu.state_dict())
    env = {"torch": torch, "dist": dist, "big": torch.ones(MB16, device="openreg"), "big_cpu": torch.ones(MB16),
           "loss_fn": torch.nn.CrossEntropyLoss(), "model": DistributedDataParallel(model),
           "model_cpu": DistributedDataParallel(model_cpu), "x_cpu": torch.rand(64, 256),
           "y_cpu": torch.randint(0, 10, (64,))}
    env["x"], env["y"] = env["x_cpu"].to("openreg"), env["y_cpu"].to("openreg")
    env["opt"] = torch.optim.SGD(env["model"].parameters(), lr=0.01)
    env["opt_cpu"] = torch.optim.SGD(env["model_cpu"].parameters(), lr=0.01)
    return env


STEP = "opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step(); torch.openreg.synchronize()"
CASES = [  # (name, openreg statement, CPU statement, goal)
    ("all_reduce of 16 MB across 2 ranks", "dist.all_reduce(big); torch.openreg.synchronize()",
     "dist.all_reduce(big_cpu)", "<= 1.2x"),
    ("DDP training step (MLP, 64 samples per rank)", STEP,
     STEP.replace("opt", "opt_cpu").replace("model(x), y", "model_cpu(x_cpu), y_cpu")
     .replace("; torch.openreg.synchronize()", ""), "<= 1.2x"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cases() -> list[Case]:
    import torch.distributed as dist

    port = _free_port()
    peer = subprocess.Popen([sys.executable, "-m", "openreg.bench.distributed", str(port)], env=os.environ.copy())
    env = _setup(0, port)
    atexit.register(lambda: (dist.destroy_process_group() if dist.is_initialized() else None, peer.wait()))
    return [Case(name, dev, cpu, env, goal, runs=RUNS) for name, dev, cpu, goal in CASES]


def _peer(port: int) -> None:
    """Rank 1: what harness.measure runs on rank 0 for each case (a warm-up, then RUNS runs), openreg then CPU."""
    import torch.distributed as dist

    env = _setup(1, port)
    for _, dev, cpu, _ in CASES:
        for stmt in (dev, cpu):
            for _ in range(1 + RUNS):
                exec(stmt, env)
    dist.destroy_process_group()


def versions() -> dict[str, str]:
    import openreg_eager

    return {"torch": torch.__version__, "openreg-eager": openreg_eager.__version__}


SUITE = Suite("distributed", "orccl on openreg vs gloo on the CPU, 2 ranks", cases, versions)

if __name__ == "__main__":
    _peer(int(sys.argv[1]))
