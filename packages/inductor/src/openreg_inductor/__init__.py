"""openreg-inductor: torch.compile for the openreg device.

Inductor generates C++ kernels for openreg graphs as it does for the CPU, and openreg launches them
on its streams over device memory (`launch`). Nothing here runs at `import torch`: openreg's
autoload layer registers `torch.openreg._inductor_backend_init`, which imports this package and
registers `backend` at the first Inductor compilation. `config` holds the backend's options
(`torch.compile(..., options={"openreg.<key>": value})`).
"""

from . import config
from ._version import __version__  # written at build time from the checkout's VERSION file

__all__ = ["config"]
