"""Fixtures for the openreg-runtime tests; what every package's tests share is openreg_runtime.testing.

Configuration (OPENREG_*) is read once per process, so tests that depend on the environment run a short script
in a fresh interpreter (`run_python`)."""

from __future__ import annotations

import gc

import pytest
import torch

from openreg_runtime import testing


@pytest.fixture(autouse=True)
def _restore_current_device_and_streams():
    yield
    testing.restore_device_state()


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


@pytest.fixture
def run_python():
    """testing.run_python(code, env=None, ...): a fresh interpreter whose environment has no OPENREG_* variables
    except `env`'s."""
    return testing.run_python


@pytest.fixture
def describe_proc():
    return testing.describe
