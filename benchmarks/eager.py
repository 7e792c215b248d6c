"""Benchmarks of openreg-eager's kernels against the same work on the CPU.

    python benchmarks/eager.py [--json PATH] [--min-run-time SECONDS]

The suite is defined in openreg.bench.eager, so that `openreg bench` runs the same cases.
"""

from openreg.bench.eager import SUITE
from openreg.bench.harness import script

if __name__ == "__main__":
    script(SUITE)
