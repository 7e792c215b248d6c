"""Memory pools: torch.cuda's MemPool and use_mem_pool for openreg, over the caching allocator's pools (those graph
captures allocate from)."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

from .. import _C
from ._devices import _DeviceLike, _index, _lazy_init, current_device, device_count
from .memory import memory_snapshot


class MemPool:
    """A pool of the caching allocator, as torch.cuda.MemPool: the allocations a thread makes inside
    ``use_mem_pool(pool)`` come from it, the blocks they free are cached for the pool's allocations alone, and
    ``empty_cache()`` keeps them while the pool is alive. `no_split` is how openreg's allocator always works (it
    splits no block)."""

    def __init__(self, allocator: Any = None, use_on_oom: bool = False, no_split: bool = False):
        if allocator is not None:
            raise NotImplementedError("openreg's memory pools allocate with openreg's caching allocator: a custom "
                                      "allocator (torch.cuda's CUDAPluggableAllocator) has no openreg counterpart; "
                                      "pass allocator=None")
        _lazy_init()
        self._id = _C.graph_pool_handle()
        self._device = current_device()
        _C.use_pool(self._device, self._id[1])
        if use_on_oom:  # its cached blocks serve allocations outside it that find the device out of memory
            _C.lend_on_oom(self._device, self._id[1])
        # As CUDA's: the pool gives its cached blocks back once it is gone (not at exit: the process frees them).
        weakref.finalize(self, _give_back, self._device, self._id[1]).atexit = False

    @property
    def id(self) -> tuple[int, int]:
        """The pool's id, as torch.cuda.graph(pool=...) and memory_snapshot(mempool_id) take it."""
        return self._id

    @property
    def allocator(self) -> None:
        return None

    def use_count(self) -> int:
        """How many hold the pool on the device it was made on: the pool itself, and each use_mem_pool block
        and graph captured with it."""
        return _C.pool_users(self._device, self._id[1])

    def snapshot(self, include_traces: bool = True) -> list[dict[str, Any]]:
        """The segments the pool holds, as memory_snapshot() gives them."""
        return memory_snapshot(self._id, include_traces=include_traces)



def _give_back(device: int, pool: int) -> None:
    _C.release_pool(device, pool)
    for idx in range(device_count()):
        _C.empty_cache(idx, pool)  # kept while a graph or a use_mem_pool block still uses the pool


@contextlib.contextmanager
def use_mem_pool(pool: MemPool, device: _DeviceLike = None) -> Iterator[None]:
    """As torch.cuda.use_mem_pool: routes the calling thread's allocations on `device` (the current device when
    None) to `pool`; other threads' (autograd's backward, for one) are not routed. A graph captured meanwhile keeps
    the pool until the graph is reset."""
    idx = _index(device)
    _C.use_pool(idx, pool.id[1])
    previous = _C.route_to_pool(idx, pool.id[1])
    try:
        yield
    finally:
        _C.route_to_pool(idx, previous)
        _C.release_pool(idx, pool.id[1])
