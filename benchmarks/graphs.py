"""Benchmarks of graph replay on openreg (issue 18) against the CPU running the same work eagerly.

    python benchmarks/graphs.py [--json PATH] [--min-run-time SECONDS]

The suite is defined in openreg.bench.graphs, so that `openreg bench` runs the same cases.
"""

from openreg.bench.graphs import SUITE
from openreg.bench.harness import script

if __name__ == "__main__":
    script(SUITE)
