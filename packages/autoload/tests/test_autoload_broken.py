"""A broken or mismatched layer never breaks `import torch`: one warning names the layer, the cause and
the fix, and using the device raises an error that says the same.

Each test breaks a copy of an installed layer (see `Shadow` in conftest.py) in its own way.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest
from autoload_helpers import VERSION, Shadow, run_openreg

from openreg_runtime.testing import run_json


def _built_for_another_torch(package: Path) -> None:
    (package / "_build_info.py").write_text('TORCH_VERSION = "2.12.0"\n')


def _extension(package: Path) -> Path:
    return next(package.glob("_C.*so"))


def _truncate_extension(package: Path) -> None:
    so = _extension(package)
    so.write_bytes(so.read_bytes()[: so.stat().st_size // 2])


def _garbage_glue_library(package: Path) -> None:
    (package / "lib" / "libopenreg_glue.so").write_bytes(b"not a shared library\n" * 10)


def _remove_extension(package: Path) -> None:
    _extension(package).unlink()


def _extension_of_another_library(package: Path) -> None:
    # A well-formed shared library that is not a Python module: only importing it can tell.
    shutil.copy(package.parent / "openreg_runtime" / "lib" / "libopenreg_core.so", _extension(package))


class Breakage(NamedTuple):
    module: str
    damage: Callable[[Path], None] | None  # None: the layer is not installed at all
    distribution: str
    says: tuple[str, ...]  # what the cause and fix must mention
    at_import: bool = True  # found at `import torch` (else: at first use)


BREAKAGES = {
    "runtime built for another torch": Breakage("openreg_runtime", _built_for_another_torch, "openreg-runtime",
                                                ("built for torch 2.12.0", "torch==2.12.0", "--no-build-isolation")),
    "eager built for another torch": Breakage("openreg_eager", _built_for_another_torch, "openreg-eager",
                                              ("built for torch 2.12.0", "torch==2.12.0")),
    "eager extension truncated": Breakage("openreg_eager", _truncate_extension, "openreg-eager",
                                          ("corrupt shared library", "truncated", "--force-reinstall")),
    "runtime library not an ELF file": Breakage("openreg_runtime", _garbage_glue_library, "openreg-runtime",
                                                ("libopenreg_glue.so", "not an ELF file", "--force-reinstall")),
    "eager extension missing": Breakage("openreg_eager", _remove_extension, "openreg-eager",
                                        ("missing its compiled extension", "--force-reinstall")),
    "eager extension not a module": Breakage("openreg_eager", _extension_of_another_library, "openreg-eager",
                                             ("failed to import", "PyInit__C", "--force-reinstall"), at_import=False),
    "eager not installed": Breakage("openreg_eager", None, "openreg-eager",
                                    ("is not installed", f"pip install openreg-eager=={VERSION}")),
}

# Hides a module as if it were not installed; the probe script starts with it when asked to.
HIDE = """
import importlib.abc, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {module!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Hide())
"""

PROBE = """
import json, warnings
warnings.simplefilter("always")
def load_warnings(caught):
    return [str(w.message) for w in caught if w.category.__name__ == "LoadWarning"]
with warnings.catch_warnings(record=True) as caught:
    import torch
result = {"at_import": load_warnings(caught), "cpu": (torch.ones(2) + 1).tolist(),
          "available": torch.accelerator.is_available(), "device": str(torch.device("openreg:1"))}
# Inductor probes the device module on every compile, CPU graphs included: that must not raise.
from torch.utils.backend_registration import _get_custom_mod_func
result["probe"] = _get_custom_mod_func("Scheduling").__name__
errors = []
with warnings.catch_warnings(record=True) as caught:
    # torch.ops first: it skips torch's lazy initialisation
    for use in (lambda: torch.ops.aten.arange.default(2, device="openreg"), lambda: torch.ones(2, device="openreg"),
                lambda: torch.ones(2).to("openreg:1"), lambda: torch.openreg.device_count(),
                lambda: torch.ones(2, device="openreg")):
        try:
            use()
            errors.append(None)
        except Exception as exc:
            errors.append([type(exc).__module__ + "." + type(exc).__name__, str(exc)])
result["at_use"], result["errors"] = load_warnings(caught), errors
result["available_after_use"] = torch.accelerator.is_available()
from torch._dynamo.device_interface import get_interface_for_device
try:
    result["interface"] = get_interface_for_device("openreg").__name__
except NotImplementedError as exc:  # torch's error for a device without one, as for any other device
    result["interface"] = str(exc)
print(json.dumps(result))
"""


def _break(shadow: Shadow, breakage: Breakage) -> tuple[str, dict[str, str]]:
    if breakage.damage is None:
        return HIDE.format(module=breakage.module), {}
    shadow.copy("openreg_runtime")  # the eager layer's breakages use the runtime's files too
    if breakage.module != "openreg_runtime":
        shadow.copy(breakage.module)
    breakage.damage(shadow.root / breakage.module)
    return "", shadow.env()


@pytest.mark.parametrize("name", BREAKAGES)
def test_import_torch_survives_and_using_the_device_says_why(shadow: Shadow, name: str):
    breakage = BREAKAGES[name]
    prelude, env = _break(shadow, breakage)
    result = run_json(prelude + PROBE, env=env)

    # import torch worked, and so does everything that is not the device
    assert result["cpu"] == [2.0, 2.0]
    assert result["device"] == "openreg:1"  # the name stays registered, so that using it can say what is wrong
    # Damage that only importing can reveal is unknown until first use: till then the device looks available.
    assert result["available"] is not breakage.at_import
    assert result["available_after_use"] is False
    assert result["probe"].endswith("Scheduling")  # a class, not an exception
    # exactly one warning, at import when the damage shows without loading anything
    warned = result["at_import"] + result["at_use"]
    assert len(warned) == 1, warned
    assert len(result["at_import"]) == int(breakage.at_import)
    # every use of the device raises the same error the warning gave
    for error in result["errors"]:
        assert error is not None, result["errors"]
        kind, message = error
        assert kind == "openreg.LoadError"
        assert message in warned[0]
        assert message.startswith("the openreg device is unavailable: ")
        assert breakage.distribution in message and "Fix: " in message
        for words in breakage.says:
            assert words in message
    assert result["interface"] == f"No interface for device openreg: {result['errors'][0][1]}"


def test_the_command_fails_with_the_fix(shadow: Shadow):
    breakage = BREAKAGES["eager built for another torch"]
    _, env = _break(shadow, breakage)
    out = run_openreg("doctor", env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAILED: was built for torch 2.12.0" in out.stdout
    assert "1 problem found:" in out.stdout
    assert "Fix: rebuild it against the installed torch" in out.stdout
    out = run_openreg("demo", env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    last = out.stderr.strip().splitlines()[-1]  # after the LoadWarning that `import torch` gave
    assert last.startswith("openreg demo: the openreg device is unavailable: openreg-eager"), out.stderr
    assert "Traceback" not in out.stderr


def _bug_in_the_loader(package: Path) -> str:
    (package / "_loader.py").write_text("raise RuntimeError('a bug in openreg')\n")
    return "a bug in openreg"


def _version_file_never_written(package: Path) -> str:  # a checkout installed in editable mode, never built
    (package / "_version.py").unlink()
    return "No module named 'openreg._version'"


@pytest.mark.parametrize("damage", [_bug_in_the_loader, _version_file_never_written])
def test_unexpected_failure_in_openreg_itself_never_breaks_import_torch(shadow: Shadow, damage):
    # Whatever goes wrong inside openreg while torch autoloads it ends as a warning, never an exception.
    cause = damage(shadow.copy("openreg"))
    result = run_json("""
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch
        print(json.dumps({"cpu": (torch.ones(1) * 2).tolist(),
                          "warnings": [str(w.message) for w in caught if "openreg" in str(w.message)]}))
    """, env=shadow.env())
    assert result["cpu"] == [2.0]
    assert len(result["warnings"]) == 1
    assert cause in result["warnings"][0]
    assert "pip install --force-reinstall openreg" in result["warnings"][0]


def test_a_broken_compile_layer_leaves_the_rest_working(shadow: Shadow):
    # Inductor probes the device module on every compile: a compile layer that fails to import must not break
    # compiling for the CPU, and compiling for openreg then says why it cannot.
    (shadow.root / "openreg_inductor").mkdir()
    (shadow.root / "openreg_inductor" / "__init__.py").write_text("raise ImportError('half-installed')\n")
    result = run_json("""
        import json, torch
        from torch.utils.backend_registration import _get_custom_mod_func
        from openreg import _compile
        probe = _get_custom_mod_func("Scheduling")
        print(json.dumps({"probe": probe.__name__, "reason": _compile.reason(),
                          "eager": (torch.ones(2, device="openreg") + 1).tolist()}))
    """, env=shadow.env())
    assert result["probe"] == "Scheduling" and result["eager"] == [2.0, 2.0]  # the stand-in
    assert "openreg-inductor failed to import (ImportError: half-installed)" in result["reason"]
    assert f"pip install --force-reinstall --no-deps openreg-inductor=={VERSION}" in result["reason"]


if sys.platform != "linux":  # the ELF checks are Linux-only
    pytestmark = pytest.mark.skip(reason="the broken-library checks read ELF headers")
