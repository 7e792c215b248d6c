"""Sending openreg tensors and storages to other processes (torch.multiprocessing), as CUDA IPC sends CUDA ones.

The first time a storage is sent it moves into shared memory (its bytes copied in stream order); the receiver maps
that memory as memory of the same openreg device, so writes on either side are seen by the other (after the
writer's stream has run them, as with CUDA IPC), and the memory is freed when both sides have dropped it. The
descriptor travels as multiprocessing sends any: as a `Process` argument under spawn, or through a `Queue` while
the sender is alive. Torch 2.13 and 2.14 ask no device for this: openreg's patch module registers `reduce_tensor`
and `reduce_storage` with torch.multiprocessing's pickler for openreg tensors and storages.
"""

from __future__ import annotations

from multiprocessing.reduction import DupFd

import torch

from . import _C


def _handle(tensor: torch.Tensor) -> tuple:
    fd, nbytes = _C.share(tensor)
    return DupFd(fd), nbytes, tensor.device.index


def _open(handle, nbytes: int, device: int) -> torch.UntypedStorage:
    return _C.open_shared(handle.detach(), nbytes, device).untyped_storage()


def reduce_tensor(tensor: torch.Tensor):
    if tensor.requires_grad and not tensor.is_leaf:  # torch's own rule and words
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not support "
            "crossing process boundaries.  If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue)."
        )
    torch.utils.hooks.warn_if_has_hooks(tensor)
    layout = (tensor.dtype, tuple(tensor.size()), tuple(tensor.stride()), tensor.storage_offset())
    return rebuild_tensor, (type(tensor), _handle(tensor), layout, tensor.requires_grad)


def rebuild_tensor(cls: type, handle: tuple, layout: tuple, requires_grad: bool) -> torch.Tensor:
    dtype, size, stride, offset = layout
    storage = _open(*handle)
    t = torch.empty((0,), dtype=dtype, device=storage.device).set_(storage, offset, size, stride)
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad)


def reduce_storage(storage: torch.UntypedStorage):
    as_bytes = torch.empty((0,), dtype=torch.uint8, device=storage.device).set_(storage)
    return _open, _handle(as_bytes)
