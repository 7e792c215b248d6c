"""openreg-eager: compute for the openreg device.

Importing it installs the generic kernel: every ATen op that has a CPU kernel
runs that kernel on openreg device memory in place, asynchronously on the
current stream, with output shapes worked out on the host (meta kernels).
Ops whose output shape depends on the data synchronise, as on CUDA. Sparse and
quantized tensors run the CPU's kernels for their layout on device memory, at
the call. No op goes through a CPU fallback (copying to the CPU and back).
"""

import openreg_runtime

from ._build_info import TORCH_VERSION as BUILT_FOR_TORCH
from ._version import __version__  # written at build time from the checkout's VERSION file

openreg_runtime.check_torch_release("openreg-eager", "eager", BUILT_FOR_TORCH)

from . import _C  # noqa: E402  (installs the generic kernel, autocast and openreg:: ops as it loads)
from .custom_ops import scaled_silu  # noqa: E402

__all__ = ["BUILT_FOR_TORCH", "scaled_silu"]
