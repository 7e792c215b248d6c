"""Shared helpers for the autoload tests (imported by name: a `conftest` module name is shared by
every package's tests, so helpers there would clash).

What happens at `import torch` is the subject here, so nearly every test runs a short script in a
fresh interpreter (openreg_runtime.testing's `run_python`). Broken installs are made by copying an
installed layer into a scratch folder, breaking the copy and putting that folder first on PYTHONPATH
(`shadow`): the installed environment itself is never touched. This module does not import openreg,
so it also serves the runtime-only variant, where openreg is not installed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from openreg_runtime.testing import checkout_version, clean_env

ROOT = Path(__file__).resolve().parents[3]
VERSION = checkout_version(__file__)


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
