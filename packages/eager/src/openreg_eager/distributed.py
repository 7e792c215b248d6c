"""orccl, openreg's c10d backend: torch.distributed on openreg tensors, over gloo.

torch.distributed finds it as the openreg device's backend (openreg registers the name at `import torch`),
so `init_process_group()` with no backend, `"cpu:gloo,openreg:orccl"` and `init_device_mesh("openreg", ...)`
use it. Each call runs gloo, on the device's memory in place, on a stream of the device reserved for
communication, ordered after the work queued on the current stream; the current stream waits for it as it
does for NCCL.
"""

import torch.distributed as dist

from . import _C


def create(store, rank: int, size: int, timeout):
    """c10d's creator for the orccl backend (see torch.distributed.Backend.register_backend)."""
    gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
    return _C.distributed.orccl(gloo, rank, size)
