"""What openreg adds to `import torch` (issue 8's bound: at most 10 ms), against torch's own import, in fresh
interpreters. A timing, so a benchmark: it prints and never fails.

    python benchmarks/import_cost.py [RUNS]

Torch imports the entry point with importlib.import_module, which -X importtime does not time, so the same work is
timed through `import openreg` with autoload off (it does exactly what the entry point does), with bytecode cached.
"""

import os
import re
import subprocess
import sys


def _import_ms() -> tuple[float, float]:
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import torch; import openreg"],
                         env=env, capture_output=True, text=True, check=True).stderr
    cumulative = {m.group(2): int(m.group(1)) / 1000
                  for m in re.finditer(r"import time:\s+\d+ \|\s+(\d+) \| (torch|openreg)$", err, re.MULTILINE)}
    return cumulative["openreg"], cumulative["torch"]


if __name__ == "__main__":
    runs = [_import_ms() for _ in range(1 + int(sys.argv[1] if len(sys.argv) > 1 else 8))][1:]  # first: warm-up
    openreg_ms = sorted(r[0] for r in runs)
    torch_ms = sorted(r[1] for r in runs)
    print(f"openreg's registration: best {openreg_ms[0]:.1f} ms, median {openreg_ms[len(runs) // 2]:.1f} ms "
          f"(bound 10 ms); torch's import: best {torch_ms[0]:.0f} ms; ratio {openreg_ms[0] / torch_ms[0]:.3f}")
