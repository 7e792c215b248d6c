"""Building C++ kernels for openreg, as torch.utils.cpp_extension builds them for CUDA.

    from openreg_runtime import cpp_extension
    ops = cpp_extension.load_inline("myops", cpp_sources=SOURCE)          # JIT, like torch's load_inline
    setup(ext_modules=[cpp_extension.OpenRegExtension("myops._C", ["myops.cpp"])],
          cmdclass={"build_ext": torch.utils.cpp_extension.BuildExtension})  # like CUDAExtension

Each adds openreg's headers (`#include "openreg/extension.h"`: the surface for kernel authors) and libraries to
torch's own. Extensions must be built against the torch release openreg-runtime was built for, with a C++
compiler: both are checked first, with an error that says what to do.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch
from torch.utils import cpp_extension as _torch

from ._build_info import TORCH_VERSION as _BUILT_FOR
from .build import INCLUDE_DIR, LIB_DIR

LIBRARIES = ["openreg_glue", "openreg_core"]


def include_paths() -> list[str]:
    """torch's include paths, then openreg's."""
    return [*_torch.include_paths(), str(INCLUDE_DIR)]


def library_paths() -> list[str]:
    """torch's library paths, then openreg's (the runtime's lib/ folder)."""
    return [*_torch.library_paths(), str(LIB_DIR)]


def _check_toolchain() -> None:
    running = torch.__version__.split("+")[0]
    if running != _BUILT_FOR:
        raise RuntimeError(
            f"openreg-runtime was built for torch {_BUILT_FOR} but torch {running} is installed: an extension built "
            f"now would not load beside it. Install torch=={_BUILT_FOR}, or rebuild openreg-runtime against this "
            "torch (pip install --no-build-isolation --force-reinstall openreg-runtime).")
    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        raise RuntimeError(
            f"no C++ compiler: {compiler!r} (from $CXX, default c++) is not on PATH. Install one (e.g. g++), or "
            "point $CXX at it.")


def _ldflags() -> list[str]:
    # rpath: the extension finds the runtime's libraries wherever it is loaded from, as openreg's own wheels do.
    return [f"-L{LIB_DIR}", *(f"-l{lib}" for lib in LIBRARIES), f"-Wl,-rpath,{LIB_DIR}"]


def OpenRegExtension(name: str, sources: list[str | os.PathLike], *args, **kwargs):  # noqa: N802 (CUDAExtension's)
    """A setuptools Extension for openreg kernels, as torch.utils.cpp_extension.CUDAExtension is for CUDA ones;
    build it with torch's BuildExtension."""
    _check_toolchain()
    kwargs["include_dirs"] = [*kwargs.get("include_dirs", []), str(INCLUDE_DIR)]
    kwargs["library_dirs"] = [*kwargs.get("library_dirs", []), str(LIB_DIR)]
    kwargs["libraries"] = [*kwargs.get("libraries", []), *LIBRARIES]
    kwargs["extra_link_args"] = [*kwargs.get("extra_link_args", []), f"-Wl,-rpath,{LIB_DIR}"]
    return _torch.CppExtension(name, [str(Path(s)) for s in sources], *args, **kwargs)


def load(name: str, sources: list[str | os.PathLike], *, extra_include_paths: list[str] | None = None,
         extra_ldflags: list[str] | None = None, **kwargs):
    """torch.utils.cpp_extension.load with openreg's headers and libraries."""
    _check_toolchain()
    return _torch.load(name, [str(s) for s in sources], extra_include_paths=[str(INCLUDE_DIR),
                       *(extra_include_paths or [])], extra_ldflags=[*_ldflags(), *(extra_ldflags or [])], **kwargs)


def load_inline(name: str, cpp_sources: str | list[str], *, extra_include_paths: list[str] | None = None,
                extra_ldflags: list[str] | None = None, **kwargs):
    """torch.utils.cpp_extension.load_inline with openreg's headers and libraries."""
    _check_toolchain()
    return _torch.load_inline(name, cpp_sources, extra_include_paths=[str(INCLUDE_DIR), *(extra_include_paths or [])],
                              extra_ldflags=[*_ldflags(), *(extra_ldflags or [])], **kwargs)
