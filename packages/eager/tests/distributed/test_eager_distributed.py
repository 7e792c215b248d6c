"""orccl, openreg's c10d backend over gloo, with two ranks (spawned processes, one openreg device each)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ranks

HERE = Path(__file__).parent


def test_every_collective_matches_gloo_on_cpu_tensors_under_strict_mode():
    # Strict mode: orccl reads and writes device memory in place, inside its launches only.
    ranks.spawn(ranks.collectives, env={"OPENREG_STRICT": "1"})


def test_collectives_are_ordered_on_streams_as_nccl_orders_them():
    ranks.spawn(ranks.streams)


def test_bad_input_gives_errors_naming_the_tensor_and_the_rank():
    ranks.spawn(ranks.bad_input)


def test_a_peer_that_never_arrives_gives_an_error_within_the_timeout():
    ranks.spawn(ranks.absent_peer)


def test_ddp_trains_as_single_process_training_on_the_cpu():
    ranks.spawn(ranks.ddp)


def test_fsdp2_trains_as_single_process_training_and_its_checkpoint_round_trips(tmp_path):
    ranks.spawn(ranks.fsdp_and_checkpoint, str(tmp_path / "checkpoint"))


def test_dtensor_and_tensor_parallel_match_the_full_tensors():
    ranks.spawn(ranks.tensor_parallel)


def _torchrun(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args, str(HERE / "ddp_script.py")],
                            cwd=HERE, env={**os.environ, "PYTHONPATH": str(HERE), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out
    return out


def test_torchrun_launches_ddp_with_a_device_per_local_rank():
    out = _finish(_torchrun("--standalone", "--nproc-per-node", "2"))
    assert "rank 0 trained on openreg:0" in out and "rank 1 trained on openreg:1" in out, out


def test_two_hosts_of_one_process_each_train_together():
    # Each "host" is a torchrun of its own (node ranks 0 and 1) whose one process uses its local device, openreg:0,
    # meeting at the first host's address, as on a cluster; the first names its network interface for gloo.
    port = str(ranks.free_port())
    common = ["--nnodes", "2", "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", port]
    hosts = [_torchrun(*common, "--node-rank", "0", env={"GLOO_SOCKET_IFNAME": "lo"}),
             _torchrun(*common, "--node-rank", "1")]
    outs = [_finish(h) for h in hosts]
    assert "rank 0 trained on openreg:0" in outs[0] and "rank 1 trained on openreg:0" in outs[1], outs


def test_process_groups_are_created_and_destroyed_again_without_leaks():
    ranks.spawn(ranks.lifecycle, [ranks.free_port() for _ in range(3)])
