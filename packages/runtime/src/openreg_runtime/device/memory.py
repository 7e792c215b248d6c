"""Allocator statistics and control, in torch.cuda's format."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .. import _C
from ._devices import _DeviceLike, _index


def memory_stats(device: _DeviceLike = None) -> OrderedDict[str, Any]:
    """The caching allocator's statistics, flattened as torch.cuda.memory_stats
    does ("allocated_bytes.all.current", ...)."""
    flat: list[tuple[str, Any]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else key, sub)
        else:
            flat.append((prefix, value))

    walk("", _C.memory_stats(_index(device)))
    return OrderedDict(sorted(flat))


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
