"""Devices: count, selection, properties, synchronisation."""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import _C

_DeviceLike = torch.device | str | int | None


def _selects_nothing(device: _DeviceLike) -> bool:
    """A negative index: torch.cuda.device(-5) selects nothing, and torch.cuda.synchronize(-5) the current device."""
    return isinstance(device, int) and not isinstance(device, bool) and device < 0


def _torch_cuda_implementation(impl: Callable, **names) -> Callable:
    """torch.cuda's own implementation `impl`, run with `names` (openreg's API) where its module's globals name
    torch.cuda's: what openreg shares with CUDA's Python stays torch's, in every torch release."""
    return types.FunctionType(impl.__code__, {**impl.__globals__, **names}, impl.__name__, impl.__defaults__,
                              impl.__closure__)


def _index(device: _DeviceLike, optional: bool = True) -> int:
    """The index of the existing device that `device` names (also a `torch.openreg.device(i)` object, as torch.cuda
    takes one); None, -1 (c10's "current device") or, if `optional`, a bare "openreg" is the current one. Checked
    here: the C++ below takes an 8-bit index, so 2**20 would be 0."""
    if isinstance(device, _DeviceContext):
        device = device.idx
    if device is None:
        return _C.current_device()
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "openreg":
            raise ValueError(f"Expected an openreg device, but got: {device}")  # CUDA's words
        if device.index is None and not optional:  # as torch.cuda.set_device's
            raise ValueError(f"Expected a torch.device with a specified index or an integer, but got:{device}")
        device = -1 if device.index is None else device.index
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"expected a device index, name or torch.device, but got {type(device).__name__}: "
                        f"{device!r}")
    if device == -1:
        return _C.current_device()
    _check(device)
    return device


def _is_in_bad_fork() -> bool:
    return _C.in_bad_fork()


# Checks of the OPENREG_* settings that the layers above read (the fallback policy): each raises a RuntimeError
# naming the variable. Run when the device starts, so that a bad value is reported then, not at first use.
settings_checks: list[Callable[[], object]] = []
_memory_warned = False


def _warn_if_memory_exceeds_host() -> None:
    """Device memory is reserved without backing: filling more than the host has ends in the kernel's OOM killer,
    not in torch.OutOfMemoryError."""
    global _memory_warned
    if _memory_warned or not os.environ.get("OPENREG_DEVICE_MEMORY"):
        return
    _memory_warned = True
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with open("/proc/meminfo") as f:
        swap = next((int(line.split()[1]) * 1024 for line in f if line.startswith("SwapTotal:")), 0)
    capacity = _C.config()["memory_bytes"]
    if capacity > host + swap:
        warnings.warn(
            f"OPENREG_DEVICE_MEMORY={os.environ['OPENREG_DEVICE_MEMORY']} gives each openreg device more memory "
            f"({capacity / 2**30:.1f} GiB) than this host has ({(host + swap) / 2**30:.1f} GiB with swap): filling it "
            "would end in the system's out-of-memory killer instead of torch.OutOfMemoryError. Set a smaller size.",
            RuntimeWarning, stacklevel=3)


def _lazy_init() -> None:
    _C.check_not_forked()
    if _C.config()["strict"]:  # also validates the environment
        # A host access faults: say which allocation, and where in Python (faulthandler, chained after ours).
        if not faulthandler.is_enabled():
            faulthandler.enable()
        _C.install_fault_report()
    for check in settings_checks:
        check()
    _warn_if_memory_exceeds_host()
    _C.init()


def init() -> None:
    """Starts the device now, as torch.cuda.init() does: is_initialized() is then True (and a fork is then bad)."""
    _lazy_init()


def is_initialized() -> bool:
    """Whether the device has started (init(), worker threads or device memory)."""
    return _C.is_initialized()


def is_available() -> bool:
    """False, as torch.cuda.is_available(), when the settings keep the device from starting."""
    try:
        _C.config()
        for check in settings_checks:
            check()
        return _C.device_count() > 0
    except RuntimeError:
        return False


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device: _DeviceLike) -> None:
    _C.set_device(_index(device, optional=False))


class device:
    """Context manager that makes `device` the current openreg device."""

    def __init__(self, device: _DeviceLike):
        self.idx = device if _selects_nothing(device) else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = _C.current_device()
            _C.set_device(self.idx)
        return self

    def __exit__(self, *exc) -> bool:
        if self.prev_idx >= 0:
            _C.set_device(self.prev_idx)
        return False


_DeviceContext = device


class device_of(device):
    """Context manager that makes the device of `obj` (a tensor or storage) current when it is an openreg one, and
    changes nothing otherwise, as torch.cuda.device_of does for CUDA."""

    def __init__(self, obj: torch.Tensor | torch.UntypedStorage):
        super().__init__(obj.get_device() if obj.device.type == "openreg" else -1)


def can_device_access_peer(device: _DeviceLike, peer_device: _DeviceLike) -> bool:
    """Whether kernels on `device` could read `peer_device`'s memory: any two different openreg devices can, their
    memory being the host's (as CUDA GPUs with peer access can). A device that does not exist raises
    AssertionError, as torch.cuda's does."""
    _lazy_init()
    indices = []
    for what, d in (("device", device), ("peer device", peer_device)):
        try:
            indices.append(_index(d))
        except RuntimeError as exc:
            raise AssertionError(f"Invalid {what} id: {exc}") from None
    return indices[0] != indices[1]


def synchronize(device: _DeviceLike = None) -> None:
    """Waits for all work queued on every stream of `device`, and raises the
    first failure any of it hit."""
    _lazy_init()
    _C.synchronize(_C.current_device() if _selects_nothing(device) else _index(device))


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """As torch.cuda.set_sync_debug_mode: "warn" (1) warns and "error" (2) raises at every call that blocks the host
    on the device (a blocking copy, .item(), nonzero, a boolean mask), naming it; "default" (0) lets them be.
    synchronize() and event and stream waits are exempt."""
    _lazy_init()
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    _C.set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    """The mode set_sync_debug_mode set: 0 (default), 1 (warn) or 2 (error)."""
    _lazy_init()
    return _C.get_sync_debug_mode()


_STREAM_SANITIZER_MODES = ("off", "error", "warn")


def set_stream_sanitizer(mode: str) -> None:
    """Turns the stream sanitizer (OPENREG_SANITIZE=streams) on or off. "error": a launch that touches device memory
    which unfinished work on another stream uses, with nothing (an event, wait_stream, synchronize) ordering the two,
    or memory freed and reused while another stream may still use it (a missing record_stream), raises a
    RuntimeError naming both ops, their streams and the lines that launched them, and is not queued. "warn": the same
    report as a warning, and the work runs. "off": no checks, no cost. Turning it on forgets earlier work."""
    _lazy_init()
    if mode not in _STREAM_SANITIZER_MODES:
        raise ValueError(f"set_stream_sanitizer({mode!r}): the mode is one of {', '.join(_STREAM_SANITIZER_MODES)}")
    _C.set_stream_sanitizer(_STREAM_SANITIZER_MODES.index(mode))


def get_stream_sanitizer() -> str:
    """The stream sanitizer's mode: "off", "error" or "warn" (set_stream_sanitizer, OPENREG_SANITIZE)."""
    _lazy_init()
    return _STREAM_SANITIZER_MODES[_C.get_stream_sanitizer()]


def _sleep(cycles: int) -> None:
    """Queues work that keeps the current stream busy for `cycles` cycles, as torch.cuda._sleep(cycles) does, of a
    nominal 1 GHz clock: 1_000_000 cycles a millisecond, about a GPU's, so that CUDA's tests keep their timing."""
    _C._sleep(int(cycles))


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
    return DeviceProperties(
        name=get_device_name(idx),
        index=idx,
        total_memory=_C.config()["memory_bytes"],
        multi_processor_count=os.cpu_count() or 1,
    )


def get_device_name(device: _DeviceLike = None) -> str:
    _index(device)  # checks it
    return "openreg (simulated on the host CPU)"


def get_device_capability(device: _DeviceLike = None) -> tuple[int, int]:
    props = get_device_properties(device)
    return props.major, props.minor


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def is_tf32_supported() -> bool:
    """False: openreg's kernels are the CPU's, which have no TF32 (torch.backends.cuda's TF32 settings do not reach
    them)."""
    return False


def get_amp_supported_dtype() -> list[torch.dtype]:
    """What torch.autocast("openreg", dtype=...) takes: CUDA's autocast takes float32 too."""
    return [torch.float16, torch.bfloat16, torch.float32]


def _check(idx: int) -> None:
    count = _C.device_count()
    if not 0 <= idx < count:
        raise torch.AcceleratorError(  # as CUDA's invalid device ordinal (a RuntimeError)
            f"openreg device index {idx} is out of range: valid indices are 0 to {count - 1} "
            "(set OPENREG_DEVICE_COUNT for more devices)"
        )


def _flush_autograd_threads() -> None:
    """torch's backward() stashes a Python object (a contextvars copy) in each autograd graph task, and a device's
    autograd thread may drop the last reference to the task just after backward() returned. If the interpreter is
    finalising by then, that thread's decref takes the GIL and the process aborts ("terminate called without an
    active exception"). A graph task run on each device's autograd thread through the engine itself (which stashes
    nothing) returns only after the thread is done with the previous one."""
    engine = torch.autograd.variable.Variable._execution_engine
    for i in range(_C.device_count()):
        x = torch.zeros((), device=f"openreg:{i}", requires_grad=True)
        engine.run_backward((x * 1,), (torch.ones((), device=x.device),), False, False, (), True, True)


@atexit.register
def _drain() -> None:
    # Let queued work finish before the interpreter tears down what it uses.
    if _C.is_initialized() and not _C.in_bad_fork():
        # Each step on its own: a failure nobody synchronised for (of any type) must not skip the other.
        for step in (_flush_autograd_threads, lambda: _C.synchronize(-1)):
            with contextlib.suppress(Exception):
                step()
