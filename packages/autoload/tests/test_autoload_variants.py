"""The install variants behave as users expect. `nox -s variants` installs each one from built wheels
in its own environment and runs this file there (with TEST_OPENREG_VARIANT naming it); elsewhere the
variant is read from what is installed. Imports nothing of openreg at module level: in the
runtime-only variant there is no openreg package.

- runtime: `pip install openreg-runtime`: the device, tensors and copies; compute ops say to install openreg.
- eager: `pip install openreg`: everything eager, autoloaded (see also test_autoload_compile.py).
- compile: `pip install "openreg[compile]"`: + openreg-inductor, torch.compile on openreg.
"""

from __future__ import annotations

import os
from importlib import metadata

import pytest
from autoload_helpers import installed

from openreg_runtime.testing import run_python

DISTRIBUTIONS = {
    "runtime": {"openreg-runtime"},
    "eager": {"openreg-runtime", "openreg-eager", "openreg"},
    "compile": {"openreg-runtime", "openreg-eager", "openreg", "openreg-inductor"},
}


def _installed_variant() -> str:
    if installed("openreg_inductor") and installed("openreg"):
        return "compile"
    return "eager" if installed("openreg") else "runtime"


VARIANT = os.environ.get("TEST_OPENREG_VARIANT") or _installed_variant()
only = {v: pytest.mark.skipif(VARIANT != v, reason=f"for the {v} variant; this is {VARIANT}") for v in DISTRIBUTIONS}


def test_exactly_the_variants_distributions_are_installed():
    assert VARIANT in DISTRIBUTIONS, f"unknown variant {VARIANT!r}"
    found = set()
    for name in ("openreg-runtime", "openreg-eager", "openreg-inductor", "openreg"):
        try:
            found.add(metadata.distribution(name).metadata["Name"])
        except metadata.PackageNotFoundError:
            pass
    assert found == DISTRIBUTIONS[VARIANT]


@only["runtime"]
def test_runtime_alone_is_not_autoloaded_and_has_no_command():
    out = run_python("""
        import torch
        try:
            torch.device("openreg")
        except RuntimeError:
            print("not registered")
        try:
            import openreg
        except ModuleNotFoundError:
            print("no openreg")
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["not registered", "no openreg"]


@only["runtime"]
def test_runtime_alone_has_the_device_tensors_and_copies():
    out = run_python("""
        import torch, openreg_runtime
        x = torch.arange(4.0).to("openreg:0")
        y = torch.empty(4, device="openreg:1").copy_(x)
        s = torch.openreg.Stream(1)
        with torch.openreg.stream(s):
            z = y.to("openreg:0", non_blocking=True)
        s.synchronize()
        print(torch.openreg.device_count(), y.cpu().tolist(), z.cpu().tolist(), torch.openreg.memory_allocated(1) > 0)
    """, args=["-W", "error"])
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2 [0.0, 1.0, 2.0, 3.0] [0.0, 1.0, 2.0, 3.0] True"


@only["runtime"]
def test_runtime_alone_says_compute_needs_openreg():
    out = run_python("""
        import torch, openreg_runtime
        try:
            torch.ones(2, device="openreg") + 1
        except NotImplementedError as exc:
            print(exc)
    """)
    assert out.returncode == 0, out.stderr
    assert "compute ops come with openreg-eager" in out.stdout and "pip install openreg" in out.stdout


@only["eager"]
def test_eager_has_no_compile_layer_and_doctor_says_how_to_add_it():
    out = run_python("import openreg.cli, sys; sys.exit(openreg.cli.main(['doctor']))")
    assert out.returncode == 0, out.stdout + out.stderr
    assert 'not installed (torch.compile on openreg needs it: pip install "openreg[compile]")' in out.stdout


@only["compile"]
def test_compile_variant_compiles_for_openreg_and_loads_inductor_only_then():
    out = run_python("""
        import sys, torch
        print("openreg_inductor" in sys.modules, "torch._inductor" in sys.modules)
        x = torch.arange(6.0, device="openreg")
        print(torch.compile(lambda x: (x * 2).sin() + 1)(x).device, "openreg_inductor" in sys.modules)
        print(torch.allclose(torch.compile(lambda x: (x * 2).sin() + 1)(x).cpu(), (x.cpu() * 2).sin() + 1, atol=1e-5))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "openreg:0", "True", "True"]
