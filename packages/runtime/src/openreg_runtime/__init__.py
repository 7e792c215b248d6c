"""openreg-runtime: the openreg device for PyTorch.

Importing this package registers the PrivateUse1 backend under the name
``openreg``, the ``torch.openreg`` device module and the ``Tensor.openreg()``
family of methods. It starts nothing: worker threads and device memory appear
on first use.
"""

import torch

from ._build_info import TORCH_VERSION as BUILT_FOR_TORCH

__version__ = "0.1.0"


def _check_torch() -> None:
    installed = torch.__version__.split("+")[0]
    if installed != BUILT_FOR_TORCH:
        raise ImportError(
            f"openreg-runtime was built against torch {BUILT_FOR_TORCH}, but torch {installed} is installed; "
            "its C++ extension only works with the release it was built for. Rebuild it against the installed "
            "torch: pip install --no-build-isolation --force-reinstall --no-deps openreg-runtime "
            "(from a source checkout: pip install --no-build-isolation packages/runtime)"
        )


_check_torch()

# _C registers the allocator, device guard, hooks and kernels as it loads.
from . import _C, device  # noqa: E402


def _register() -> None:
    # Idempotent, so that importing through several layers (or twice) is harmless.
    if torch._C._get_privateuse1_backend_name() != "openreg":
        torch.utils.rename_privateuse1_backend("openreg")
    if getattr(torch, "openreg", None) is not device:
        torch._register_device_module("openreg", device)
    if not hasattr(torch.Tensor, "is_openreg"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )


_register()

__all__ = ["BUILT_FOR_TORCH", "device"]
