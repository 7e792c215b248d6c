"""openreg: the user-facing package of the openreg PyTorch device.

The ``torch.backends`` autoload entry point, the discovery of installed layers
and the ``openreg`` command arrive with the autoload issue. For now importing
this package imports the eager layer (and through it the runtime).
"""

import openreg_eager

__version__ = "0.1.0"
