"""openreg-inductor's C++ headers (include/openreg_inductor/), as the text that generated code carries.

The headers are real C++ over the runtime's C ABI (openreg/core/c_api.h), each compiled on its own by the tests, so that
a change to that ABI fails to compile instead of being called the old way. Generated code carries their text, openreg's
own `#include`s expanded, rather than `#include` lines: Inductor gives a device no way to add include directories to its
compilers (AOTInductor's model build least of all), and its caches, keyed by the source text, then see a changed header
as changed code.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

INCLUDE_DIR = Path(__file__).parent / "include"
# The runtime's, found without importing it (that would register the device; see backend.py).
RUNTIME_INCLUDE_DIR = Path(importlib.util.find_spec("openreg_runtime").submodule_search_locations[0]) / "include"
INCLUDE_DIRS = (INCLUDE_DIR, RUNTIME_INCLUDE_DIR)

# An #include of openreg's headers (the runtime's or this package's): expanded, since no compiler of Inductor's has
# their directories. Other #includes (the standard library's, torch's) stay.
_OPENREG_INCLUDE = re.compile(r"^#include <(openreg(?:_inductor)?/[\w/.]+)>\n", re.MULTILINE)


def shipped() -> list[str]:
    """The headers this package ships, as generated code names them ("openreg_inductor/launch.h", ...)."""
    return sorted(path.relative_to(INCLUDE_DIR).as_posix() for path in INCLUDE_DIR.rglob("*.h"))


@functools.cache
def text(*headers: str) -> str:
    """C++ equal to `#include`-ing `headers` (e.g. "openreg_inductor/launch.h"), with openreg's headers written out in
    place of their #includes. Each is guarded as `#pragma once` guards it, so two texts can share a translation unit."""
    return "".join(_expanded(header) for header in headers)


def _expanded(header: str) -> str:
    path = next((d / header for d in INCLUDE_DIRS if (d / header).is_file()), None)
    if path is None:
        raise FileNotFoundError(f"openreg's C++ header {header} is not installed (looked in "
                                f"{', '.join(map(str, INCLUDE_DIRS))}): reinstall openreg-inductor and openreg-runtime")
    body = path.read_text().replace("#pragma once\n", "", 1)
    body = _OPENREG_INCLUDE.sub(lambda include: _expanded(include[1]), body)
    guard = "OPENREG_HEADER_" + re.sub(r"\W", "_", header).upper()
    return f"#ifndef {guard}\n#define {guard}\n// {header}\n{body}#endif  // {guard}\n"
