"""Benchmarks of the openreg runtime against the CPU device, measured in the same run.

Not tests: they print figures (and with --json write them) and never fail on a timing.
Each row times the same work on openreg and on the CPU; `ratio` is openreg time / CPU time.

    python benchmarks/runtime.py [--json PATH] [--min-run-time SECONDS]
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch
import torch.utils.benchmark as benchmark

import openreg_runtime  # registers the openreg device

COPY_BYTES = 64 << 20  # 64 MiB of float32


def measure(stmt: str, env: dict, min_run_time: float) -> float:
    """Median seconds per run of `stmt`."""
    timer = benchmark.Timer(stmt=stmt, globals=env, num_threads=torch.get_num_threads())
    timer.timeit(3)  # warm up: the caching allocator, the worker threads
    return timer.blocked_autorange(min_run_time=min_run_time).median


def cases() -> list[tuple[str, str, str, dict, str]]:
    """(name, openreg stmt, CPU stmt, globals, goal) for each benchmark."""
    n = COPY_BYTES // 4
    env = {
        "torch": torch,
        "host_src": torch.rand(n),
        "host_dst": torch.empty(n),
        "dev_src": torch.rand(n).to("openreg"),
        "dev_dst": torch.empty(n, device="openreg"),
        "a": torch.zeros(1, device="openreg"),
        "b": torch.ones(1, device="openreg"),
        "a_cpu": torch.zeros(1),
        "b_cpu": torch.ones(1),
    }
    return [
        ("copy host->openreg 64 MiB", "dev_dst.copy_(host_src)", "host_dst.copy_(host_src)", env,
         "bandwidth >= 0.8x CPU memcpy"),
        ("copy openreg->host 64 MiB", "host_dst.copy_(dev_src)", "host_dst.copy_(host_src)", env,
         "bandwidth >= 0.8x CPU memcpy"),
        ("cached empty(1024) + free", "torch.empty(1024, device='openreg')", "torch.empty(1024)", env,
         "time <= 1.0x CPU"),
        ("1-element copy_ + synchronize", "a.copy_(b); torch.openreg.synchronize()", "a_cpu.copy_(b_cpu)", env,
         "(launch round trip)"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures to PATH as JSON")
    parser.add_argument("--min-run-time", type=float, default=0.5, metavar="SECONDS",
                        help="minimum time spent timing each statement (default 0.5)")
    args = parser.parse_args()

    print(f"torch {torch.__version__}, openreg-runtime {openreg_runtime.__version__}, "
          f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}")
    header = f"{'benchmark':<32} {'openreg':>11} {'cpu':>11} {'ratio':>7}  {'bandwidth (GB/s)':<24} goal"
    print(header)
    print("-" * len(header))
    rows = []
    for name, dev_stmt, cpu_stmt, env, goal in cases():
        dev = measure(dev_stmt, env, args.min_run_time)
        cpu = measure(cpu_stmt, env, args.min_run_time)
        row = {"name": name, "openreg_s": dev, "cpu_s": cpu, "ratio": dev / cpu, "goal": goal}
        bandwidth = ""
        if name.startswith("copy "):
            row["openreg_GBps"], row["cpu_GBps"] = COPY_BYTES / dev / 1e9, COPY_BYTES / cpu / 1e9
            row["bandwidth_ratio"] = cpu / dev
            bandwidth = f"{row['openreg_GBps']:.1f} vs {row['cpu_GBps']:.1f} ({row['bandwidth_ratio']:.2f}x)"
        rows.append(row)
        print(f"{name:<32} {dev * 1e6:>9.1f}us {cpu * 1e6:>9.1f}us {dev / cpu:>6.2f}x  {bandwidth:<24} {goal}")

    if args.json:
        info = {"torch": torch.__version__, "openreg_runtime": openreg_runtime.__version__,
                "threads": torch.get_num_threads()}
        args.json.write_text(json.dumps({**info, "results": rows}, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
