"""Benchmarks of round trips between the host and openreg (issue 17's table) against the CPU, quiet and with
every core busy.

    python benchmarks/latency.py [--json PATH] [--min-run-time SECONDS]

The suite is defined in openreg.bench.latency, so that `openreg bench` runs the same cases.
"""

from openreg.bench.harness import script
from openreg.bench.latency import SUITE

if __name__ == "__main__":
    script(SUITE)
