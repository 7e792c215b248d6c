"""Fixtures for the openreg-eager tests; what every package's tests share is openreg_runtime.testing."""

from __future__ import annotations

import pytest
import torch

import openreg_eager
from openreg_runtime import testing


@pytest.fixture(autouse=True)
def _restore_device_state():
    yield
    testing.restore_device_state()


@pytest.fixture
def no_fallback():
    """The test must run without the CPU fallback: every op it calls has a kernel on openreg."""
    openreg_eager.reset_fallback_counts()
    yield
    torch.openreg.synchronize()
    assert openreg_eager.fallback_counts() == {}, "ops ran through the CPU fallback"
