"""Test support shared by the tests of every openreg package, as torch.testing._internal is for PyTorch's own:
fresh interpreters for what openreg reads once per process, the device state each test starts from, and the
version the checkout is at. Reference models are in `models`.

Importing it starts nothing on the device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import torch

# What decides how a fresh interpreter loads openreg: a child gets these from `env` only, never from the tests'
# own environment.
_SWITCHES = ("OPENREG_", "TORCH_DEVICE_BACKEND_AUTOLOAD", "TORCHDYNAMO_", "PYTHONWARNINGS")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SWITCHES)}
    env.update(extra)
    return env


def run_python(code: str, *, env: dict[str, str] | None = None, args: list[str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """Runs `code` (dedented) in a fresh interpreter (with `args` before -c); openreg's configuration and the
    autoload switches come from `env` only."""
    return subprocess.run([sys.executable, *(args or []), "-c", textwrap.dedent(code)], env=clean_env(**(env or {})),
                          capture_output=True, text=True, timeout=timeout)


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"returncode={proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"


def run_json(code: str, **kwargs) -> dict:
    """Runs `code`, which prints one JSON object as its last line of stdout, and returns that object."""
    proc = run_python(code, **kwargs)
    assert proc.returncode == 0, describe(proc)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def checkout_version(tests_file: str) -> str:
    """The version in the VERSION file of the checkout that `tests_file` (a test's __file__) belongs to: what
    the installed layers must say they are."""
    for folder in Path(tests_file).resolve().parents:
        if (folder / "VERSION").is_file() and (folder / "packages").is_dir():
            return (folder / "VERSION").read_text().strip()
    raise FileNotFoundError(f"{tests_file} is not inside an openreg checkout (no VERSION file above it)")


def restore_device_state() -> None:
    """What every test starts from: openreg:0 current, the default stream current on every device. Work still
    queued by the previous test finishes first, so that its failure is reported against it."""
    torch.openreg.synchronize()
    for idx in range(torch.openreg.device_count()):
        torch.openreg.set_stream(torch.openreg.default_stream(idx))
    torch.openreg.set_device(0)
