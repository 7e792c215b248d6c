"""Kernels for openreg: Inductor's C++ (CPU) code generation, with openreg's options applied.

The kernels are ordinary host C++; what makes them openreg kernels is how they are launched
(`openreg_inductor.launch`): on the current stream, over device memory.
"""

from __future__ import annotations

from torch._inductor import config as inductor_config
from torch._inductor.codegen.cpp import CppScheduling

from .. import config


def options():
    """Inductor's C++ settings that openreg's options stand for, for the duration of a codegen step."""
    return inductor_config.patch({"cpp.simdlen": config.simdlen})


class OpenRegScheduling(CppScheduling):
    def codegen_node(self, node) -> None:
        with options():
            super().codegen_node(node)
