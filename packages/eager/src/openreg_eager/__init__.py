"""openreg-eager: compute kernels for the openreg device.

The ATen kernels, autocast, RNG ops and the CPU-fallback policy arrive with the
eager issue. For now this package only imports the runtime, which registers the
device; it adds no operators of its own.
"""

import openreg_runtime

__version__ = "0.1.0"
