"""Devices: count, selection, properties, synchronisation."""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass

import torch

from .. import _C

_DeviceLike = torch.device | str | int | None


def _index(device: _DeviceLike, optional: bool = True) -> int:
    """The device index that `device` names; None (or a bare "openreg") is the current one."""
    if device is None:
        return _C.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "openreg":
            raise ValueError(f"expected an openreg device, but got {device}")
        return _C.current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise TypeError(f"expected a device index, name or torch.device, but got {type(device).__name__}: {device!r}")


def _is_in_bad_fork() -> bool:
    return _C.in_bad_fork()


def _lazy_init() -> None:
    if _C.in_bad_fork():
        raise RuntimeError(
            "Cannot use the openreg device in a child process forked after the parent initialised it: its worker "
            "threads do not survive fork. Use the 'spawn' start method (multiprocessing.set_start_method('spawn')) "
            "or start using openreg only after forking."
        )
    _C.config()  # validates the environment


def init() -> None:
    _lazy_init()


def is_initialized() -> bool:
    """Whether the device has started (worker threads or device memory exist)."""
    return _C.is_initialized()


def is_available() -> bool:
    try:
        return _C.device_count() > 0
    except RuntimeError:
        return False


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device: _DeviceLike) -> None:
    _C.set_device(_index(device))


class device:
    """Context manager that makes `device` the current openreg device."""

    def __init__(self, device: _DeviceLike):
        self.idx = _index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C.current_device()
        _C.set_device(self.idx)
        return self

    def __exit__(self, *exc) -> bool:
        _C.set_device(self.prev_idx)
        return False


def synchronize(device: _DeviceLike = None) -> None:
    """Waits for all work queued on every stream of `device`, and raises the
    first failure any of it hit."""
    _lazy_init()
    _C.synchronize(_index(device))


def _sleep(milliseconds: int) -> None:
    """Queues work that keeps the current stream busy, like torch.cuda._sleep."""
    _C._sleep(int(milliseconds))


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    index: int
    total_memory: int
    multi_processor_count: int
    major: int = 1
    minor: int = 0


def get_device_properties(device: _DeviceLike = None) -> DeviceProperties:
    idx = _index(device)
    _check(idx)
    return DeviceProperties(
        name=get_device_name(idx),
        index=idx,
        total_memory=_C.config()["memory_bytes"],
        multi_processor_count=os.cpu_count() or 1,
    )


def get_device_name(device: _DeviceLike = None) -> str:
    _check(_index(device))
    return "openreg (simulated on the host CPU)"


def get_device_capability(device: _DeviceLike = None) -> tuple[int, int]:
    props = get_device_properties(device)
    return props.major, props.minor


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def _check(idx: int) -> None:
    count = _C.device_count()
    if not 0 <= idx < count:
        raise RuntimeError(
            f"openreg device index {idx} is out of range: valid indices are 0 to {count - 1} "
            "(set OPENREG_DEVICE_COUNT for more devices)"
        )


@atexit.register
def _drain() -> None:
    # Let queued work finish before the interpreter tears down what it uses.
    if _C.is_initialized() and not _C.in_bad_fork():
        try:
            _C.synchronize(-1)
        except RuntimeError:
            pass
