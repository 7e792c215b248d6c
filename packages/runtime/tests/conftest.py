"""Shared fixtures for the openreg-runtime tests.

Configuration (OPENREG_*) is read once per process, so tests that depend on
the environment run a short script in a fresh interpreter (`run_python`).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import openreg_runtime  # noqa: F401  (registers the openreg backend)

# The tests below assume the default configuration of the process under test.
DEVICE_COUNT = int(os.environ.get("OPENREG_DEVICE_COUNT") or 2)


@pytest.fixture(autouse=True)
def _restore_current_device_and_streams():
    """Every test starts and ends on openreg:0 with default streams current."""
    yield
    for idx in range(torch.openreg.device_count()):
        torch.openreg.set_stream(torch.openreg.default_stream(idx))
    torch.openreg.set_device(0)


@pytest.fixture
def two_devices():
    if torch.openreg.device_count() < 2:
        pytest.fail("these tests need OPENREG_DEVICE_COUNT >= 2 (the default is 2)")
    return torch.device("openreg:0"), torch.device("openreg:1")


@pytest.fixture
def clean_device():
    """Drains the device and returns the cache, so statistics start from a known baseline."""
    gc.collect()
    torch.openreg.synchronize()
    torch.openreg.empty_cache()
    return torch.device("openreg:0")


def _run_python(code: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENREG_")}
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=clean,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def run_python():
    """run_python(code, env=None, timeout=60) -> CompletedProcess, in a fresh
    interpreter whose environment has no OPENREG_* variables except `env`."""
    return _run_python


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"returncode={proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"


@pytest.fixture
def describe_proc():
    return describe
