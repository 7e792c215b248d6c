"""The layers openreg is made of, and what can be learnt about them without importing them.

Nothing here loads a shared library: finding a layer, reading the torch release its C++ was
built for and looking at its ELF headers costs well under a millisecond, so `import torch`
can tell a broken install from a working one without paying for the import.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
import struct
import sys
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

from ._version import __version__ as VERSION  # every layer of one openreg release has the same version


class Layer(NamedTuple):
    name: str  # what the docs call it
    distribution: str  # what pip installs
    module: str  # what Python imports
    folder: str  # its folder under packages/ in a source checkout
    compiled: bool  # carries C++ built against one torch release


RUNTIME = Layer("runtime", "openreg-runtime", "openreg_runtime", "runtime", compiled=True)
EAGER = Layer("eager", "openreg-eager", "openreg_eager", "eager", compiled=True)
COMPILE = Layer("compile", "openreg-inductor", "openreg_inductor", "inductor", compiled=False)
REQUIRED = (RUNTIME, EAGER)  # what `pip install openreg` brings; COMPILE comes with the extra
LAYERS = (RUNTIME, EAGER, COMPILE)


class Problem(NamedTuple):
    """Why a layer cannot load, and what the user does about it."""

    layer: Layer
    cause: str
    fix: str

    def __str__(self) -> str:
        return f"{self.layer.distribution} (the {self.layer.name} layer) {self.cause}. Fix: {self.fix}"


def torch_release() -> str:
    import torch

    return torch.__version__.split("+")[0]


def package_dir(layer: Layer) -> Path | None:
    """Where `layer`'s package lives, or None when it is not installed (found without importing it)."""
    try:
        spec = importlib.util.find_spec(layer.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def version(layer: Layer) -> str | None:
    """The installed version of `layer`'s distribution, or None."""
    try:
        return metadata.version(layer.distribution)
    except metadata.PackageNotFoundError:
        return None


def built_for(layer: Layer, folder: Path | None = None) -> str | None:
    """The torch release `layer`'s C++ was built against (its _build_info.py, read as text), or None."""
    folder = folder or package_dir(layer)
    try:
        text = (folder / "_build_info.py").read_text() if folder else ""
    except OSError:
        return None
    found = re.search(r"""^TORCH_VERSION\s*=\s*["']([^"']+)["']""", text, re.MULTILINE)
    return found.group(1) if found else None


def reinstall(layer: Layer) -> str:
    return f"reinstall it: pip install --force-reinstall --no-deps {layer.distribution}=={VERSION}"


def check(layer: Layer) -> Problem | None:
    """What keeps `layer` from loading, found without loading it; None when nothing is visibly wrong."""
    folder = package_dir(layer)
    if folder is None:
        return Problem(layer, "is not installed", f"pip install {layer.distribution}=={VERSION}")
    if not layer.compiled:
        return None
    built, installed = built_for(layer, folder), torch_release()
    if built is None:
        return Problem(layer, "has no build information (_build_info.py is missing or unreadable)", reinstall(layer))
    if built != installed:
        return Problem(
            layer,
            f"was built for torch {built}, but torch {installed} is installed, and its C++ only works with the "
            "release it was built for",
            f"rebuild it against the installed torch (pip install --no-build-isolation --force-reinstall --no-deps "
            f"{layer.distribution}=={VERSION}; from a source checkout: pip install --no-build-isolation "
            f"packages/{layer.folder}), or install torch=={built}",
        )
    extension = next((folder / f"_C{s}" for s in importlib.machinery.EXTENSION_SUFFIXES
                      if (folder / f"_C{s}").is_file()), None)
    if extension is None:
        return Problem(layer, "is missing its compiled extension (_C)", reinstall(layer))
    for library in [extension, *sorted(folder.glob("lib/*.so"))]:
        if reason := unloadable(library):
            return Problem(layer, f"has a corrupt shared library {library.name} ({reason})", reinstall(layer))
    return None


def unloadable(path: Path) -> str | None:
    """Why `path` cannot be a shared library for this interpreter (ELF header, class and length), or None.
    Catches empty, truncated and foreign files; anything subtler is found when the layer is imported."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        with path.open("rb") as f:
            header = f.read(64)
            size = f.seek(0, 2)
    except OSError as exc:
        return str(exc)
    if len(header) < 64 or header[:4] != b"\x7fELF":
        return "not an ELF file"
    if header[4] != (2 if sys.maxsize > 2**32 else 1):
        return "built for another word size"
    if header[4] == 2:
        endian = "<" if header[5] == 1 else ">"
        (section_offset,) = struct.unpack_from(endian + "Q", header, 0x28)
        entry_size, count = struct.unpack_from(endian + "HH", header, 0x3A)
        if section_offset + entry_size * count > size:
            return f"truncated: {size} bytes, its headers need {section_offset + entry_size * count}"
    return None
