"""Allocator statistics and control, in torch.cuda's format."""

from __future__ import annotations

import pickle
import sys
import warnings
from collections import OrderedDict
from typing import Any

import torch

from .. import _C
from ._devices import _DeviceLike, _index, _torch_cuda_implementation, current_device


def _flatten(nested: dict[str, Any]) -> OrderedDict[str, Any]:
    """{"a": {"b": 1}} as {"a.b": 1}, sorted, as torch.cuda flattens its statistics."""
    flat: list[tuple[str, Any]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else key, sub)
        else:
            flat.append((prefix, value))

    walk("", nested)
    return OrderedDict(sorted(flat))


def memory_stats_as_nested_dict(device: _DeviceLike = None) -> dict[str, Any]:
    """The caching allocator's statistics ({"allocated_bytes": {"all": {"current": ...}}}), as torch.cuda's."""
    nested = _C.memory_stats(_index(device))
    # CUDA counts blocks above max_split_size, which it never splits; openreg splits no block, so has none.
    for stat in ("oversize_allocations", "oversize_segments"):
        nested[stat] = dict.fromkeys(("current", "peak", "allocated", "freed"), 0)
    return nested


def memory_stats(device: _DeviceLike = None) -> OrderedDict[str, Any]:
    """The caching allocator's statistics, flattened as torch.cuda.memory_stats
    does ("allocated_bytes.all.current", ...)."""
    return _flatten(memory_stats_as_nested_dict(device))


def host_memory_stats() -> OrderedDict[str, Any]:
    """As torch.cuda.host_memory_stats: the pinned host allocator's statistics ("allocated_bytes.current",
    "active_requests.peak", "num_host_alloc", "host_alloc_time.total", ...), flattened."""
    return _flatten(_C.host_memory_stats())


def host_memory_stats_as_nested_dict() -> dict[str, Any]:
    return _C.host_memory_stats()


def reset_accumulated_host_memory_stats() -> None:
    _C.reset_accumulated_host_memory_stats()


def reset_peak_host_memory_stats() -> None:
    _C.reset_peak_host_memory_stats()


def _stat(device: _DeviceLike, name: str) -> int:
    return _C.memory_stats(_index(device))[name]["all"]


def memory_allocated(device: _DeviceLike = None) -> int:
    return _stat(device, "allocated_bytes")["current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return _stat(device, "allocated_bytes")["peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    return _stat(device, "reserved_bytes")["current"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    return _stat(device, "reserved_bytes")["peak"]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    _C.reset_peak_memory_stats(_index(device))


def _reset_every_peak(deprecated: str, device: _DeviceLike) -> None:
    warnings.warn(f"torch.openreg.{deprecated} now calls torch.openreg.reset_peak_memory_stats, which resets /all/ "
                  "peak memory stats.", FutureWarning, stacklevel=3)
    reset_peak_memory_stats(device)


def reset_max_memory_allocated(device: _DeviceLike = None) -> None:
    """Deprecated, as torch.cuda's: resets every peak statistic (reset_peak_memory_stats), and warns so."""
    _reset_every_peak("reset_max_memory_allocated", device)


def reset_max_memory_cached(device: _DeviceLike = None) -> None:
    """Deprecated, as torch.cuda's: resets every peak statistic (reset_peak_memory_stats), and warns so."""
    _reset_every_peak("reset_max_memory_cached", device)


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    _C.reset_accumulated_memory_stats(_index(device))


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes of the device; memory held by the cache counts as used."""
    return _C.mem_get_info(_index(device))


def empty_cache(device: _DeviceLike = None) -> None:
    """Returns the cached, unused memory of the device (every device if None)
    to the host, after the device's queued work has finished."""
    if device is None:
        for idx in range(_C.device_count()):
            _C.empty_cache(idx)
    else:
        _C.empty_cache(_index(device))


def memory_cached(device: _DeviceLike = None) -> int:
    """Deprecated; see memory_reserved (as torch.cuda's)."""
    return memory_reserved(device)


def max_memory_cached(device: _DeviceLike = None) -> int:
    """Deprecated; see max_memory_reserved (as torch.cuda's)."""
    return max_memory_reserved(device)


def get_allocator_backend() -> str:
    """"native": openreg's own caching allocator, as torch.cuda names its own (openreg has no cudaMallocAsync)."""
    return "native"


def ipc_collect() -> None:
    """As torch.cuda.ipc_collect, with nothing to wait for: memory shared with other processes is freed, in stream
    order, when the last tensor on it in each process is."""


def set_per_process_memory_fraction(fraction: float, device: _DeviceLike = None) -> None:
    """As torch.cuda's: this process may reserve at most `fraction` of the device's memory (OPENREG_DEVICE_MEMORY);
    an allocation past it raises torch.OutOfMemoryError, saying so."""
    if not isinstance(fraction, float):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    if fraction < 0 or fraction > 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    _C.set_memory_fraction(_index(device, optional=False), fraction)


def get_per_process_memory_fraction(device: _DeviceLike = None) -> float:
    """The fraction set_per_process_memory_fraction set (1.0 by default)."""
    return _C.memory_fraction(_index(device, optional=False))


def caching_allocator_alloc(size: int, device: _DeviceLike = None, stream=None) -> int:
    """As torch.cuda's: `size` bytes from the caching allocator for use on `stream` (the device's current stream by
    default); returns their address, for caching_allocator_delete."""
    index = current_device() if device is None else _index(device, optional=False)
    if stream is None:
        stream = torch.openreg.current_stream(index)
    stream_id = getattr(stream, "stream_id", stream)
    if not isinstance(stream_id, int):
        raise TypeError("Invalid type for stream argument, must be `torch.openreg.Stream` or `int` representing a "
                        "stream id")
    return _C.caching_allocator_alloc(int(size), index, stream_id)


def caching_allocator_delete(mem_ptr: int) -> None:
    """As torch.cuda's: frees memory caching_allocator_alloc returned."""
    _C.caching_allocator_delete(mem_ptr)


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    """As torch.cuda.memory_summary (its own implementation, over openreg's statistics): a table of the caching
    allocator's statistics for `device`."""
    summary = _torch_cuda_implementation(torch.cuda.memory.memory_summary, memory_stats=memory_stats,
                                         _get_device_index=lambda d, optional=False: _index(d))
    return summary(device, abbreviated)


def _record_memory_history(enabled: str | None = "all", context: str | None = "all", stacks: str = "all",
                           max_entries: int = sys.maxsize, device: _DeviceLike = None, clear_history: bool = False,
                           skip_actions: list[str] | None = None, **kwargs) -> None:
    """As torch.cuda.memory._record_memory_history: from now on keeps a history of allocations and frees (the last
    `max_entries` for enabled="all", the last one for "state"; without the actions in `skip_actions`) for
    _snapshot(), and the Python stacks `context` asks for: "state", those of live blocks; "alloc", also the
    history's allocations; "all", also its frees; None, none. A re-call changes the options and keeps what was
    recorded (unless clear_history); enabled=None stops and drops it. openreg records the Python stack whatever
    `stacks` asks (no C++ frames), and every device at once."""
    if enabled not in ("all", "state", None):
        raise ValueError(f"enabled must be 'all', 'state' or None, not {enabled!r}")
    if context not in ("all", "alloc", "state", None):
        raise ValueError(f"context must be 'all', 'alloc', 'state' or None, not {context!r}")
    _C.record_memory_history(enabled is not None, _C.MemoryHistoryContext.__members__[context or "never"],
                             max_entries if enabled == "all" else 1, list(skip_actions or ()), clear_history)


def _snapshot(device: _DeviceLike = None, **kwargs) -> dict[str, Any]:
    """As torch.cuda.memory._snapshot: {"segments": what the allocator holds, each block with the stack that
    allocated it, "device_traces": per device, the allocations and frees recorded}. Readable by
    torch.cuda._memory_viz and pytorch.org/memory_viz."""
    return _C.memory_snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle", **kwargs) -> None:
    """As torch.cuda.memory._dump_snapshot: _snapshot() pickled into `filename`, for pytorch.org/memory_viz."""
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def memory_snapshot(mempool_id: tuple[int, int] | None = None, include_traces: bool = True) -> list[dict[str, Any]]:
    """As torch.cuda.memory_snapshot: the segments of every device, as _snapshot() gives them; given a pool's id
    (MemPool.id, graph_pool_handle()), only that pool's."""
    segments = _snapshot()["segments"]
    if mempool_id is None:
        return segments
    return [s for s in segments if s["segment_pool_id"] == tuple(mempool_id)]
