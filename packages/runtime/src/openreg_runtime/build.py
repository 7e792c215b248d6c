"""Compile C++ against the installed torch and the openreg runtime.

Used by the hatch build hooks of openreg's own wheels, and usable by anyone
writing kernels for openreg. Objects are cached per torch release and rebuilt
only when a source or one of its headers changed (gcc dependency files).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import subprocess
import sysconfig
from pathlib import Path

INCLUDE_DIR = Path(__file__).parent / "include"
LIB_DIR = Path(__file__).parent / "lib"


def torch_release() -> str:
    import torch

    return torch.__version__.split("+")[0]


def torch_flags() -> tuple[list[str], list[str]]:
    """Compile and link flags for code that includes torch headers."""
    import torch
    from torch.utils import cpp_extension

    cflags = [f"-I{p}" for p in cpp_extension.include_paths()]
    cflags += [f"-I{sysconfig.get_paths()['include']}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    cflags.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}")
    ldflags = [f"-L{p}" for p in cpp_extension.library_paths()]
    ldflags += ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
    return cflags, ldflags


def kineto_flags() -> list[str]:
    """Compile flags for code that plugs into Kineto, torch's profiler library, whose headers torch ships in
    include/kineto when it was built with it; none when it was not."""
    from torch.utils import cpp_extension

    for include in cpp_extension.include_paths():
        kineto = Path(include) / "kineto"
        if (kineto / "IActivityProfiler.h").exists():
            return ["-DUSE_KINETO", f"-I{kineto}"]
    return []


def _stale(obj: Path, dep: Path) -> bool:
    if not obj.exists() or not dep.exists():
        return True
    built = obj.stat().st_mtime
    text = dep.read_text().replace("\\\n", " ")
    paths = text.split(":", 1)[1].split() if ":" in text else []
    return any(not Path(p).exists() or Path(p).stat().st_mtime > built for p in paths)


def _compile(cxx: str, src: Path, obj: Path, flags: list[str], after: Path | None = None) -> None:
    """Compiles `src` into `obj` unless `obj` is newer than its sources, its headers and `after`."""
    dep = obj.with_suffix(".d")
    if not _stale(obj, dep) and (after is None or after.stat().st_mtime <= obj.stat().st_mtime):
        return
    cmd = [cxx, "-c", str(src), "-o", str(obj), "-MMD", "-MF", str(dep), *flags]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"compiling {src} failed:\n{' '.join(cmd)}\n{result.stderr}")


def build(
    *,
    name: str,
    sources: list[Path],
    out_dir: Path,
    build_dir: Path,
    kind: str = "module",
    cflags: list[str] = (),
    ldflags: list[str] = (),
    precompile: list[str] = (),
    jobs: int | None = None,
) -> Path:
    """Builds a Python extension module (`kind="module"`, file NAME + EXT_SUFFIX)
    or a shared library (`kind="shared"`, file libNAME.so) into `out_dir`.

    `precompile`: headers (as in `#include <...>`) compiled once into a precompiled header that every source
    then starts with. Parsing torch's ATen headers takes most of a source's compile time (about 11 of 15 s), so
    a library of many sources that include them builds in a bit over half the time (openreg-eager: 4m44 -> 2m43)."""
    cxx = os.environ.get("CXX", "g++")
    flags = ["-std=c++20", "-O2", "-fPIC", "-g0", "-Wall", "-Wno-unused-parameter", *cflags]
    if kind == "module":
        flags.append("-fvisibility=hidden")
    tag = hashlib.sha1(" ".join([cxx, *flags]).encode()).hexdigest()[:10]
    obj_dir = build_dir / f"{name}-{tag}"
    obj_dir.mkdir(parents=True, exist_ok=True)
    objects = [obj_dir / (Path(s).stem + ".o") for s in sources]
    pch = None
    if precompile:
        header = obj_dir / "precompiled.h"
        text = "".join(f"#include <{h}>\n" for h in precompile)
        if not header.exists() or header.read_text() != text:
            header.write_text(text)
        # gcc takes header.gch in place of the header when the flags match, which they do: the same list.
        pch = Path(f"{header}.gch")
        _compile(cxx, header, pch, ["-x", "c++-header", *flags])
        flags = [*flags, "-include", str(header)]
    with concurrent.futures.ThreadPoolExecutor(jobs or os.cpu_count() or 1) as pool:
        for f in [pool.submit(_compile, cxx, Path(s), o, flags, pch) for s, o in zip(sources, objects, strict=True)]:
            f.result()
    out_dir.mkdir(parents=True, exist_ok=True)
    if kind == "module":
        target = out_dir / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    else:
        target = out_dir / f"lib{name}.so"
    newest = max(o.stat().st_mtime for o in objects)
    if not target.exists() or target.stat().st_mtime < newest:
        soname = [] if kind == "module" else [f"-Wl,-soname,{target.name}"]
        cmd = [cxx, "-shared", "-o", str(target), *map(str, objects), *soname, *ldflags]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"linking {target.name} failed:\n{' '.join(cmd)}\n{result.stderr}")
    return target


def write_build_info(out_dir: Path) -> Path:
    """Records the torch release the binaries were built against."""
    path = out_dir / "_build_info.py"
    path.write_text(
        '"""Written by the build: the torch release these binaries were built against."""\n\n'
        f'TORCH_VERSION = "{torch_release()}"\n'
    )
    return path


def ship(build_data: dict, version: str, files: list[Path], out_dir: Path, package: str) -> None:
    """Tells hatchling about built files: a wheel takes them from `out_dir` (as
    `package`/...), an editable install finds them in the source tree."""
    build_data["pure_python"] = False
    build_data["infer_tag"] = True
    if version != "editable":
        for f in files:
            build_data["force_include"][str(f)] = f"{package}/{f.relative_to(out_dir)}"

