"""The torch-free core on its own: the C++ programs in cpp/ are built against
the installed core's headers and library only, with no torch include path (so a
torch header reaching the core fails here), and each must exit with status 0.
Like upstream OpenReg's gtest suite, but with no test framework to install."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from openreg_runtime import build

SOURCES = sorted((Path(__file__).parent / "cpp").glob("test_*.cpp"))


def _compiler() -> str:
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        pytest.fail(f"the core's C++ tests need a C++ compiler: {cxx!r} was not found (set CXX)")
    return cxx


def test_the_programs_are_found():
    assert SOURCES, "no C++ tests found next to this file (cpp/test_*.cpp)"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_core_program(source: Path, tmp_path: Path):
    program = tmp_path / source.stem
    command = [
        _compiler(), "-std=c++17", "-O1", "-Wall", "-Werror", "-pthread", f"-I{build.INCLUDE_DIR}", str(source),
        "-o", str(program), f"-L{build.LIB_DIR}", "-lopenreg_core", f"-Wl,-rpath,{build.LIB_DIR}",
    ]
    compiled = subprocess.run(command, capture_output=True, text=True)
    assert compiled.returncode == 0, f"{' '.join(command)}\n{compiled.stderr}"
    # Each program sets the configuration it needs; the device reads it once, at first use.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENREG_")}
    ran = subprocess.run([str(program)], capture_output=True, text=True, env=env, timeout=120)
    assert ran.returncode == 0, f"{source.name} exited with {ran.returncode}:\n{ran.stdout}{ran.stderr}"
