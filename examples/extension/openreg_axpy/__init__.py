"""myops::axpy from a wheel: importing the package loads the kernels and registers the fake kernel."""

from pathlib import Path

import torch

# The library registers myops::axpy (its TORCH_LIBRARY blocks) as it loads; it is no Python module.
torch.ops.load_library(next(Path(__file__).parent.glob("_C*.so")))
torch.library.register_fake("myops::axpy")(lambda x, y, a: torch.empty_like(x, memory_format=torch.contiguous_format))
