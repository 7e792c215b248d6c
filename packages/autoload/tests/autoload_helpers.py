"""Shared helpers for the autoload tests (imported by name: a `conftest` module name is shared by
every package's tests, so helpers there would clash).

What happens at `import torch` is the subject here, so nearly every test runs a short script in a
fresh interpreter (`run_python`). Broken installs are made by copying an installed layer into a
scratch folder, breaking the copy and putting that folder first on PYTHONPATH (`shadow`): the
installed environment itself is never touched. This module imports neither torch nor openreg,
so it also serves the runtime-only variant, where openreg is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENREG_", "TORCH_DEVICE_BACKEND_AUTOLOAD", "TORCHDYNAMO_", "PYTHONWARNINGS"))}
    env.update(extra)
    return env


def run_python(code: str, *, env: dict[str, str] | None = None, args: list[str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """Runs `code` (dedented) in a fresh interpreter; OPENREG_* and autoload switches come from `env` only."""
    return subprocess.run([sys.executable, *(args or []), "-c", textwrap.dedent(code)], env=clean_env(**(env or {})),
                          capture_output=True, text=True, timeout=timeout)


def run_json(code: str, **kwargs) -> dict:
    """Runs `code`, which prints one JSON object as its last line of stdout, and returns that object."""
    out = run_python(code, **kwargs)
    assert out.returncode == 0, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_openreg(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "openreg", *args], env=clean_env(**(env or {})),
                          capture_output=True, text=True, timeout=timeout)


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class Shadow:
    """Copies of installed layers in a scratch folder that comes first on PYTHONPATH, to break on purpose."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir()

    def copy(self, module: str) -> Path:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.submodule_search_locations, f"{module} is not installed"
        source = Path(next(iter(spec.submodule_search_locations)))
        return Path(shutil.copytree(source, self.root / module, ignore=shutil.ignore_patterns("__pycache__")))

    def env(self, **extra: str) -> dict[str, str]:
        path = os.pathsep.join(p for p in (str(self.root), os.environ.get("PYTHONPATH", "")) if p)
        return {"PYTHONPATH": path, **extra}
