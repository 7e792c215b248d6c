"""The C++ that openreg's generated code carries is real, checked C++: each shipped header compiles on its own over the
runtime's C ABI (and stops compiling when that ABI changes), and so does the text generated code carries. Each edit of
Inductor's generated code fails loudly, naming what it expected, on code that lacks it."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import torch
from torch.utils.cpp_extension import include_paths

from openreg_inductor import headers
from openreg_inductor.codegen import aoti_model, splices, wrapper

CXX = os.environ.get("CXX", "g++")
pytestmark = pytest.mark.skipif(shutil.which(CXX) is None, reason=f"no C++ compiler ({CXX})")

# Instantiations a header's templates need for their calls into the runtime to be checked.
INSTANTIATE = {
    "openreg_inductor/launch.h": "template void openreg_inductor::launch(const char*, int, void (*)(float*, long), "
                                 "float*, long);",
}
UNSUPPORTED = "this torch is not supported: "


def compiles(source: str, include_dirs) -> subprocess.CompletedProcess:
    cmd = [CXX, "-std=c++17", "-Wall", "-Werror", "-fsyntax-only", *(f"-I{d}" for d in include_dirs), "-x", "c++", "-"]
    return subprocess.run(cmd, input=source, capture_output=True, text=True)


def torch_dirs(header: str) -> list[str]:
    """torch's include directories, for a header that includes torch's headers (and only then)."""
    return include_paths() if "#include <torch/" in (headers.INCLUDE_DIR / header).read_text() else []


def test_the_package_ships_the_headers_its_code_names():
    assert headers.shipped() == ["openreg_inductor/aoti_model.h", "openreg_inductor/c_shims.h",
                                 "openreg_inductor/launch.h"]


@pytest.mark.parametrize("header", headers.shipped())
def test_each_header_compiles_on_its_own(header):
    source = f"#include <{header}>\n{INSTANTIATE.get(header, '')}\n"
    result = compiles(source, [*headers.INCLUDE_DIRS, *torch_dirs(header)])
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("header", headers.shipped())
def test_the_text_generated_code_carries_compiles_without_openregs_include_dirs(header):
    source = headers.text(header) + headers.text(header) + INSTANTIATE.get(header, "")  # twice: guarded, as included
    result = compiles(source, torch_dirs(header))
    assert result.returncode == 0, result.stderr
    assert "#include <openreg" not in source


def test_launch_stops_compiling_when_the_runtime_changes_its_launch_signature(tmp_path):
    runtime = tmp_path / "runtime"
    shutil.copytree(headers.RUNTIME_INCLUDE_DIR, runtime)
    c_api = runtime / "openreg" / "core" / "c_api.h"
    declared = "int flags, char* err, std::size_t errlen"
    assert declared in c_api.read_text()
    c_api.write_text(c_api.read_text().replace(declared, "int flags, int stream, char* err, std::size_t errlen"))
    header = "openreg_inductor/launch.h"
    result = compiles(f"#include <{header}>\n{INSTANTIATE[header]}\n", [headers.INCLUDE_DIR, runtime])
    assert result.returncode != 0
    assert "launch_host_fn" in result.stderr


def test_replace_once_names_what_it_expected_and_did_not_find():
    assert splices.replace_once("a b c", "b", "B", "x") == "a B c"
    with pytest.raises(RuntimeError, match=UNSUPPORTED + "doing x \\(expected to find 'q' once .*it is not there\\)"):
        splices.replace_once("a b c", "q", "Q", "doing x")
    with pytest.raises(RuntimeError, match="it is there 2 times"):
        splices.replace_once("b b", "b", "B", "doing x")


def test_the_aoti_model_constructor_edit_fails_loudly_without_its_anchor():
    with pytest.raises(RuntimeError, match=UNSUPPORTED + "openreg cannot make an AOTInductor model run on its device"):
        aoti_model.constructor("AOTInductorModel::AOTInductorModel() {\n}\n")


def test_the_kernel_loader_edit_fails_loudly_without_its_anchor():
    assert wrapper.queued("async_compile.cpp_pybinding(['float*'], '''...''')").startswith("openreg_cpp_pybinding(")
    with pytest.raises(RuntimeError, match=UNSUPPORTED + "openreg cannot load its kernels"):
        wrapper.queued("async_compile.cpp(['float*'], '''...''')")


def test_the_allocation_edit_fails_loudly_without_its_anchor():
    device = torch.device("openreg", 1)
    line = "buf0 = empty_strided((2, ), (1, ), device='openreg', dtype=torch.float32)"
    assert wrapper.allocated_on(device, line) == line.replace("'openreg'", "'openreg:1'")
    named = line.replace("'openreg'", "'openreg:1'")
    assert wrapper.allocated_on(device, named) == named  # a torch that names the device needs no edit
    with pytest.raises(RuntimeError, match=UNSUPPORTED + "openreg cannot allocate buffers on the graph's device"):
        wrapper.allocated_on(device, "buf0 = empty_strided_openreg((2, ), (1, ), torch.float32)")
