"""Small models from third-party libraries (transformers, torchvision, timm) on openreg against the CPU.

nox runs them in tests(torch-2.14.1) (or alone: `nox -s models`), which installs the libraries; run directly, a
test whose library is not installed skips.

Each test's name says the model (and attention implementation); each failure message says the quantity
compared. Ops that ran through openreg's CPU fallback are listed per test at the end of the run.
"""

from __future__ import annotations

import pytest
import torch

import openreg_eager

LIBRARIES = ("transformers", "torchvision", "timm")
_fallbacks: dict[str, dict[str, int]] = {}


def pytest_configure(config: pytest.Config) -> None:
    for name in LIBRARIES:
        config.addinivalue_line("markers", f"{name}: a model built with {name}")


@pytest.fixture(autouse=True)
def _seeded_and_fallbacks_recorded(request: pytest.FixtureRequest):
    """Each test starts from the same seed; the ops that went through the CPU fallback are recorded."""
    torch.manual_seed(0)
    openreg_eager.reset_fallback_counts()
    yield
    torch.openreg.synchronize()
    counts = openreg_eager.fallback_counts()
    if counts:
        _fallbacks[request.node.nodeid] = counts


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not _fallbacks:
        return
    terminalreporter.section("openreg: ops that ran through the CPU fallback")
    for nodeid, counts in _fallbacks.items():
        terminalreporter.write_line(f"{nodeid}: " + ", ".join(f"{op} x{n}" for op, n in sorted(counts.items())))
