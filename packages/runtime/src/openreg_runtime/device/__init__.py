"""``torch.openreg``: the CUDA-like device module of the openreg backend."""

import sys
import types

import torch

from ._devices import (
    _is_in_bad_fork,
    _lazy_init,
    _sleep,
    can_device_access_peer,
    current_device,
    device,
    device_count,
    device_of,
    get_amp_supported_dtype,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_stream_sanitizer,
    get_sync_debug_mode,
    init,
    is_available,
    is_bf16_supported,
    is_initialized,
    is_tf32_supported,
    set_device,
    set_stream_sanitizer,
    set_sync_debug_mode,
    settings_checks,
    synchronize,
)
from .graphs import OpenRegGraph, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables
from .memory import (
    caching_allocator_alloc,
    caching_allocator_delete,
    empty_cache,
    get_allocator_backend,
    get_per_process_memory_fraction,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    ipc_collect,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from .pools import MemPool, use_mem_pool
from .random import (
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .storages import STORAGE_CLASSES
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream

OutOfMemoryError = torch.OutOfMemoryError  # what openreg's allocator raises, as torch.cuda.OutOfMemoryError

globals().update(STORAGE_CLASSES)

__all__ = [
    "Event", "MemPool", "OpenRegGraph", "OutOfMemoryError", "Stream", "StreamContext", "caching_allocator_alloc",
    "caching_allocator_delete", "can_device_access_peer", "current_device", "current_stream", "default_generators",
    "default_stream", "device", "device_count", "device_of", "empty_cache", "get_allocator_backend",
    "get_amp_supported_dtype", "get_device_capability", "get_device_name", "get_device_properties",
    "get_per_process_memory_fraction", "get_rng_state", "get_rng_state_all", "get_stream_sanitizer",
    "get_sync_debug_mode", "graph", "graph_pool_handle", "host_memory_stats", "host_memory_stats_as_nested_dict",
    "init", "initial_seed", "ipc_collect", "is_available", "is_bf16_supported", "is_current_stream_capturing",
    "is_initialized", "is_tf32_supported",
    "make_graphed_callables", "manual_seed", "manual_seed_all", "max_memory_allocated", "max_memory_cached",
    "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_cached", "memory_reserved", "memory_snapshot",
    "memory_stats", "memory_stats_as_nested_dict", "memory_summary", "reset_accumulated_host_memory_stats",
    "reset_accumulated_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
    "reset_peak_host_memory_stats", "reset_peak_memory_stats", "seed", "seed_all", "set_device",
    "set_per_process_memory_fraction", "set_rng_state", "set_rng_state_all", "set_stream", "set_stream_sanitizer",
    "set_sync_debug_mode", "stream", "synchronize", "use_mem_pool", *STORAGE_CLASSES,
]


class _DeviceModule(types.ModuleType):
    @property
    def _initialized(self) -> bool:
        # torch.cuda's flag, read from any device's module: without it torch.utils.checkpoint saves no device RNG
        # state (preserve_rng_state), and the recomputed forward draws other dropout masks than the first did.
        return is_initialized()


sys.modules[__name__].__class__ = _DeviceModule
