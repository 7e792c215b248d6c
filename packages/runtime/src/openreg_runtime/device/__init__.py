"""``torch.openreg``: the CUDA-like device module of the openreg backend."""

from ._devices import (
    _is_in_bad_fork,
    _lazy_init,
    _sleep,
    current_device,
    device,
    device_count,
    get_amp_supported_dtype,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_sync_debug_mode,
    init,
    is_available,
    is_bf16_supported,
    is_initialized,
    set_device,
    set_sync_debug_mode,
    settings_checks,
    synchronize,
)
from .graphs import OpenRegGraph, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables
from .memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
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
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream

__all__ = [
    "Event", "OpenRegGraph", "Stream", "StreamContext", "current_device", "current_stream", "default_generators",
    "default_stream", "device", "device_count", "empty_cache", "get_amp_supported_dtype",
    "get_device_capability", "get_device_name", "get_device_properties", "get_rng_state", "get_sync_debug_mode",
    "get_rng_state_all", "graph", "graph_pool_handle", "init", "initial_seed", "is_available", "is_bf16_supported",
    "is_current_stream_capturing", "is_initialized", "make_graphed_callables",
    "manual_seed", "manual_seed_all", "max_memory_allocated", "max_memory_reserved", "mem_get_info",
    "memory_allocated", "memory_reserved", "memory_stats", "reset_accumulated_memory_stats",
    "reset_peak_memory_stats", "seed", "seed_all", "set_device", "set_rng_state", "set_rng_state_all",
    "set_stream", "set_sync_debug_mode", "stream", "synchronize",
]
