"""Benchmarks of the openreg runtime (copies, allocation, launches) against the CPU.

    python benchmarks/runtime.py [--json PATH] [--min-run-time SECONDS]

The suite is defined in openreg.bench.runtime, so that `openreg bench` runs the same cases.
"""

from openreg.bench.harness import script
from openreg.bench.runtime import SUITE

if __name__ == "__main__":
    script(SUITE)
