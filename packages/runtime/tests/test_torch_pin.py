"""The wheel is pinned to the torch release it was built against."""

import subprocess
import sys
from importlib import metadata

import torch

import openreg_runtime


def test_metadata_pins_the_torch_release_it_was_built_for():
    requires = metadata.requires("openreg-runtime")
    assert f"torch=={openreg_runtime.BUILT_FOR_TORCH}" in requires
    assert torch.__version__.split("+")[0] == openreg_runtime.BUILT_FOR_TORCH


def test_import_under_another_torch_release_names_both_and_the_fix():
    script = (
        "import torch\n"
        "torch.__version__ = '1.0.0'\n"
        "try:\n"
        "    import openreg_runtime\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    raise SystemExit('imported under the wrong torch')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "1.0.0" in out.stdout
    assert openreg_runtime.BUILT_FOR_TORCH in out.stdout
    assert "pip install --no-build-isolation" in out.stdout
