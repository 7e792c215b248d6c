"""Loads generated C++ kernels so that calling them queues them on the current openreg stream.

Inductor's CPU kernels reach Python through `async_compile.cpp_pybinding`, which wraps each kernel in a
small extension module. openreg's variant wraps it differently: the call hands the kernel and its
arguments to the runtime's C ABI (`openreg_launch_host_fn`, through include/openreg_inductor/launch.h), so
the kernel runs on the stream's worker, in order with eager ops, with strict mode opening its pointers.
"""

from __future__ import annotations

from torch._inductor import config as inductor_config
from torch._inductor.async_compile import AsyncCompile, get_compile_threads
from torch._inductor.codecache import CppPythonBindingsCodeCache, LambdaFuture

from . import config, headers

LAUNCH_HEADER = "openreg_inductor/launch.h"  # launch(name, flags, kernel, args...) and the C++ wrappers' DeviceGuard


def simd(simdlen: int | None):
    """Inductor's C++ vector width set to `simdlen` (None: the host's widest), for codegen or a build."""
    return inductor_config.patch({"cpp.simdlen": simdlen})


def launch_flags() -> str:
    """The flags generated code passes to `openreg_inductor::launch`: a C++ expression on c_api.h's constants."""
    return "0" if config.async_launch else "OPENREG_LAUNCH_WAIT"  # waits for the kernel to run


class OpenRegBindingsCodeCache(CppPythonBindingsCodeCache):
    """CppPythonBindingsCodeCache whose modules queue the kernel instead of calling it."""

    # The cache itself is CppPythonBindingsCodeCache's (keyed by the source, which differs), so that
    # Inductor's fresh_cache() clears it.
    extra_parse_arg = headers.text(LAUNCH_HEADER).replace("{", "{{").replace("}", "}}")  # it goes through str.format
    call_entry_function = "openreg_inductor::launch(\"compiled kernel\", {flags}, kernel, {{}}); Py_RETURN_NONE;"

    @classmethod
    def bindings(cls, flags: str) -> type[OpenRegBindingsCodeCache]:
        """The variant for `flags` (they are compiled in, so each gets its own cache key)."""
        entry = cls.call_entry_function.format(flags=flags)
        return type(f"{cls.__name__}_{flags}", (cls,), {"call_entry_function": entry})


_BINDINGS = {flags: OpenRegBindingsCodeCache.bindings(flags) for flags in ("0", "OPENREG_LAUNCH_WAIT")}


def loader(flags: str, simdlen: int | None) -> str:
    """The call that generated wrapper code makes, in place of `async_compile.cpp_pybinding(`, to load an
    openreg kernel built with these settings (baked into the wrapper, so cached graphs keep them)."""
    return f"openreg_cpp_pybinding(async_compile, {flags!r}, {simdlen!r}, "


def cpp_pybinding(async_compile: AsyncCompile, flags: str, simdlen: int | None, argtypes: list[str],
                  source_code: str):
    """`async_compile.cpp_pybinding` for openreg kernels."""
    bindings = _BINDINGS[flags]
    with simd(simdlen):  # the build flags follow the generated code
        if get_compile_threads() <= 1:
            return bindings.load_pybinding(argtypes, source_code)
        return LambdaFuture(bindings.load_pybinding_async(argtypes, source_code, submit_fn=async_compile.submit))
