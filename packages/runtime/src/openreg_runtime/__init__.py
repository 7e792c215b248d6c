"""openreg-runtime: the openreg device for PyTorch.

Importing this package registers the PrivateUse1 backend under the name
``openreg``, the ``torch.openreg`` device module and the ``Tensor.openreg()``
family of methods. It starts nothing: worker threads and device memory appear
on first use.
"""

import torch

from ._build_info import TORCH_VERSION as BUILT_FOR_TORCH
from ._version import __version__  # written at build time from the checkout's VERSION file


def check_torch_release(distribution: str, folder: str, built_for: str) -> None:
    """Raises ImportError unless the installed torch is the release `distribution`'s
    C++ was built against: an extension built for another release is broken."""
    installed = torch.__version__.split("+")[0]
    if installed != built_for:
        raise ImportError(
            f"{distribution} was built against torch {built_for}, but torch {installed} is installed; "
            "its C++ extension only works with the release it was built for. Rebuild it against the installed "
            f"torch: pip install --no-build-isolation --force-reinstall --no-deps {distribution} "
            f"(from a source checkout: pip install --no-build-isolation packages/{folder})"
        )


check_torch_release("openreg-runtime", "runtime", BUILT_FOR_TORCH)

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

__all__ = ["BUILT_FOR_TORCH", "check_torch_release", "device"]
