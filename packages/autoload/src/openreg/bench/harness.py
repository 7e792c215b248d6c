"""Shared by the benchmark suites: each case times the same work on openreg and on the CPU in
the same run and reports openreg time / CPU time. Never fails on a timing."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import torch.utils.benchmark as benchmark

from .._arguments import add_timing_arguments


def mlp() -> torch.nn.Module:
    """The MLP that the eager and the compile suites time."""
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 10))


@dataclass
class Case:
    name: str
    openreg: str  # statement timed on openreg
    cpu: str  # the same work on the CPU
    env: dict
    goal: str
    bytes_moved: int = 0  # > 0: also report bandwidth
    setup: str = ""
    extra: dict = field(default_factory=dict)
    runs: int = 0  # > 0: time exactly this many runs (for slow one-shot work such as a compilation)
    contended: bool = False  # timed while every core also runs a busy loop (busy_cores())


@dataclass
class Suite:
    name: str
    title: str
    cases: Callable[[], list[Case]]
    versions: Callable[[], dict[str, str]]


def measure(stmt: str, env: dict, min_run_time: float, setup: str = "", runs: int = 0) -> float:
    """Median seconds per run of `stmt`, after a warm-up (allocator cache, worker threads, imports)."""
    if runs:
        return _run_times(stmt, env, setup, runs)
    timer = benchmark.Timer(stmt=stmt, setup=setup or "pass", globals=env, num_threads=torch.get_num_threads())
    timer.timeit(3)
    return timer.blocked_autorange(min_run_time=min_run_time).median


def _run_times(stmt: str, env: dict, setup: str, runs: int) -> float:
    """Median seconds of `runs` runs after one warm-up, exactly 1 + runs executions: one-shot work (compilations)
    is slow, and the distributed suite's peer rank runs the same statements as often."""
    code = compile(stmt, "<benchmark>", "exec")
    exec(setup or "pass", env)
    times = []
    for _ in range(1 + runs):
        start = time.perf_counter()
        exec(code, env)
        times.append(time.perf_counter() - start)
    return sorted(times[1:])[runs // 2]


ROUNDS = 5


@contextlib.contextmanager
def busy_cores() -> Iterator[None]:
    """One busy-looping process per core meanwhile: a CI runner's or pytest-xdist's load, under which a thread
    that sleeps waits for the OS to run it again."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def compare(case: Case, min_run_time: float) -> list[tuple[float, float]]:
    """(openreg seconds, CPU seconds) per round. openreg and the CPU are timed in alternating rounds, and the
    ratio reported is the median of the rounds' ratios: a shared machine's speed drifts by up to 2x over
    seconds, which would otherwise land on one side only. One round for cases with a fixed number of runs
    (compilations)."""
    rounds = 1 if case.runs else ROUNDS
    with busy_cores() if case.contended else contextlib.nullcontext():
        return [(measure(case.openreg, case.env, min_run_time / rounds, case.setup, case.runs),
                 measure(case.cpu, case.env, min_run_time / rounds, case.setup, case.runs)) for _ in range(rounds)]


def _median(values) -> float:
    return sorted(values)[len(values) // 2]


def run_suite(suite: Suite, min_run_time: float) -> dict:
    """Times every case of `suite`, printing the table as it goes; returns the figures."""
    versions = suite.versions()
    print(suite.title)
    print(", ".join(f"{k} {v}" for k, v in versions.items())
          + f", {torch.get_num_threads()} threads, {platform.processor() or platform.machine()}")
    header = f"{'benchmark':<48} {'openreg':>11} {'cpu':>11} {'ratio':>7}  {'bandwidth (GB/s)':<24} goal"
    print(header)
    print("-" * len(header))
    rows = []
    for case in suite.cases():
        rounds = compare(case, min_run_time)
        dev, cpu = _median([d for d, _ in rounds]), _median([c for _, c in rounds])
        ratio = _median([d / c for d, c in rounds])
        row = {"name": case.name, "openreg_s": dev, "cpu_s": cpu, "ratio": ratio, "goal": case.goal,
               "rounds": rounds}
        bandwidth = ""
        if case.bytes_moved:
            row["openreg_GBps"], row["cpu_GBps"] = case.bytes_moved / dev / 1e9, case.bytes_moved / cpu / 1e9
            row["bandwidth_ratio"] = cpu / dev
            bandwidth = f"{row['openreg_GBps']:.1f} vs {row['cpu_GBps']:.1f} ({row['bandwidth_ratio']:.2f}x)"
        rows.append(row)
        print(f"{case.name:<48} {dev * 1e6:>9.1f}us {cpu * 1e6:>9.1f}us {ratio:>6.2f}x  {bandwidth:<24} "
              f"{case.goal}", flush=True)
    return {**versions, "threads": torch.get_num_threads(), "results": rows}


def script(suite: Suite, argv: list[str] | None = None) -> None:
    """The command line of one suite (benchmarks/<suite>.py): [--json PATH] [--min-run-time SECONDS]."""
    parser = argparse.ArgumentParser(description=suite.title)
    add_timing_arguments(parser)
    args = parser.parse_args(argv)
    figures = run_suite(suite, args.min_run_time)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"wrote {args.json}")
