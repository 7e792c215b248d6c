"""The stream sanitizer's overhead: the eager suite with it off and on, each against the CPU.

    python benchmarks/sanitizer.py [--json PATH] [--min-run-time SECONDS]

The suite is defined in openreg.bench.sanitizer, so that `openreg bench --suite sanitizer` runs the same cases.
"""

from openreg.bench.harness import script
from openreg.bench.sanitizer import SUITE

if __name__ == "__main__":
    script(SUITE)
