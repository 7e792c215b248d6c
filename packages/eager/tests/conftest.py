"""Fixtures for the openreg-eager tests; what every package's tests share is openreg_runtime.testing."""

from __future__ import annotations

import pytest

import openreg_eager  # noqa: F401  (installs the kernels, also where autoload is off)
from openreg_runtime import testing


@pytest.fixture(autouse=True)
def _restore_device_state():
    yield
    testing.restore_device_state()
