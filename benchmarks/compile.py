"""Benchmarks of torch.compile on openreg against torch.compile on the CPU (needs openreg[compile]).

    python benchmarks/compile.py [--json PATH] [--min-run-time SECONDS]

The suite is defined in openreg.bench.compile, so that `openreg bench` runs the same cases.
"""

from openreg.bench.compile import SUITE
from openreg.bench.harness import script

if __name__ == "__main__":
    script(SUITE)
