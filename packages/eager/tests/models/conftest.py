"""Small models from third-party libraries (transformers, torchvision, timm) on openreg against the CPU.

nox runs them in tests(torch-2.14.1) (or alone: `nox -s models`), which installs the libraries; run directly, a
test whose library is not installed skips.

Each test's name says the model (and attention implementation); each failure message says the quantity
compared.
"""

from __future__ import annotations

import pytest
import torch

LIBRARIES = ("transformers", "torchvision", "timm")


def pytest_configure(config: pytest.Config) -> None:
    for name in LIBRARIES:
        config.addinivalue_line("markers", f"{name}: a model built with {name}")


@pytest.fixture(autouse=True)
def _seeded():
    """Each test starts from the same seed."""
    torch.manual_seed(0)
