"""Dynamo's view of the openreg device: device and stream calls inside compiled functions trace
through this, as `torch.cuda.*` calls do through CudaInterface."""

from __future__ import annotations

import torch
from torch._dynamo.device_interface import (
    DeviceInterface,
    caching_worker_current_devices,
    register_interface_for_device,
)


def get_raw_stream(device_idx: int) -> int:
    """The id of the current stream of openreg:`device_idx` (what generated wrappers call a raw stream)."""
    return torch.openreg.current_stream(device_idx).stream_id


class OpenRegInterface(DeviceInterface):
    device = torch.openreg.device
    Event = torch.openreg.Event
    Stream = torch.openreg.Stream

    class Worker:
        # Compile workers ask without touching the device.
        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices["openreg"] = device

        @staticmethod
        def current_device() -> int:
            return caching_worker_current_devices.get("openreg", torch.openreg.current_device())

        @staticmethod
        def get_device_properties(device: torch.types.Device = None):
            return torch.openreg.get_device_properties(device)

    current_device = staticmethod(torch.openreg.current_device)
    set_device = staticmethod(torch.openreg.set_device)
    device_count = staticmethod(torch.openreg.device_count)
    is_available = staticmethod(torch.openreg.is_available)
    stream = staticmethod(torch.openreg.stream)
    current_stream = staticmethod(torch.openreg.current_stream)
    set_stream = staticmethod(torch.openreg.set_stream)
    synchronize = staticmethod(torch.openreg.synchronize)
    get_device_properties = staticmethod(torch.openreg.get_device_properties)
    get_compute_capability = staticmethod(torch.openreg.get_device_capability)
    is_bf16_supported = staticmethod(torch.openreg.is_bf16_supported)
    memory_allocated = staticmethod(torch.openreg.memory_allocated)

    @staticmethod
    def exchange_device(device: int) -> int:
        previous = torch.openreg.current_device()
        if device >= 0 and device != previous:
            torch.openreg.set_device(device)
        return previous

    maybe_exchange_device = exchange_device

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.openreg.set_stream(torch.openreg.Stream(stream_id=stream_id, device_index=device_index,
                                                      device_type=device_type))

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return get_raw_stream(device_idx)

    @staticmethod
    def is_triton_capable(device: torch.types.Device = None) -> bool:
        return False


def register() -> None:
    register_interface_for_device("openreg", OpenRegInterface)
    for index in range(torch.openreg.device_count()):
        register_interface_for_device(f"openreg:{index}", OpenRegInterface)
