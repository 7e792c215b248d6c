"""Fixtures for the autoload tests; the helpers live in autoload_helpers.py."""

from pathlib import Path

import pytest
from autoload_helpers import Shadow


@pytest.fixture
def shadow(tmp_path: Path) -> Shadow:
    """A scratch folder, first on the test scripts' PYTHONPATH, for broken copies of installed layers."""
    return Shadow(tmp_path / "shadow")
