"""openreg-inductor: torch.compile support for the openreg device.

Inductor scheduling and wrapper codegen, device op overrides, the Dynamo device
interface and the ``openreg`` config module arrive with the inductor issue. This
package registers nothing yet, and it does not import torch._inductor.
"""

__version__ = "0.1.0"
