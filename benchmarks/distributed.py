"""Benchmarks of collectives and DDP on openreg (issue 19) against gloo on CPU tensors.

    python benchmarks/distributed.py [--json PATH] [--min-run-time SECONDS]

The suite is defined in openreg.bench.distributed, so that `openreg bench` runs the same cases.
"""

from openreg.bench.distributed import SUITE
from openreg.bench.harness import script

if __name__ == "__main__":
    script(SUITE)
