"""`openreg bench`: the benchmark suites, openreg against the CPU in the same run.

The suites live here so that the installed command can run them; `benchmarks/*.py` in the
source tree are thin wrappers around the same definitions.
"""

from __future__ import annotations

import json
from pathlib import Path

from .._layers import VERSION
from . import compile, distributed, eager, graphs, latency, runtime, sanitizer

SUITES = {"runtime": runtime.SUITE, "eager": eager.SUITE, "latency": latency.SUITE, "graphs": graphs.SUITE,
          "distributed": distributed.SUITE, "compile": compile.SUITE, "sanitizer": sanitizer.SUITE}


def bench(suites: list[str], json_path: Path | None = None, plot_path: Path | None = None,
          min_run_time: float = 0.5) -> int:
    """Runs `suites`, prints their tables and writes the figures (JSON) and chart (PNG) when asked."""
    from .harness import run_suite

    if plot_path is not None:
        from .plot import require_matplotlib

        require_matplotlib()  # before spending minutes on timings
    figures = {}
    for i, name in enumerate(dict.fromkeys(suites)):
        if i:
            print()
        figures[name] = run_suite(SUITES[name], min_run_time)
    if json_path is not None:
        json_path.write_text(json.dumps({"openreg": VERSION, "suites": figures}, indent=2) + "\n")
        print(f"wrote {json_path}")
    if plot_path is not None:
        from .plot import plot

        plot(figures, plot_path)
        print(f"wrote {plot_path}")
    return 0
