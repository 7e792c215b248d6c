"""Kernels for openreg: Inductor's C++ (CPU) code generation, with openreg's options applied.

The kernels are ordinary host C++; what makes them openreg kernels is how they are launched
(`openreg_inductor.launch`): on the current stream, over device memory.
"""

from __future__ import annotations

from torch._inductor.codegen.cpp import CppScheduling

from .. import config
from ..launch import simd


class OpenRegScheduling(CppScheduling):
    def codegen_node(self, node) -> None:
        with simd(config.simdlen):
            super().codegen_node(node)
