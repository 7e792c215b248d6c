"""Streams and events: thin subclasses of torch.Stream and torch.Event, whose
work the device guard in the C++ glue does."""

from __future__ import annotations

import torch

from .. import _C
from ._devices import _DeviceLike, _index, _lazy_init

_TYPE = "openreg"


class Stream(torch.Stream):
    """An openreg stream: work on it runs in order, asynchronously to the host.

    ``Stream()`` takes a stream from the device's pool of 32 for its
    priority, as CUDA does: 0 (the default) down to -3, lower meaning more
    urgent; a priority beyond that range takes the nearest one."""

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs):
        _lazy_init()
        if kwargs:  # stream_id, device_index, device_type: wrap an existing stream
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device(_TYPE, _index(device)), priority=priority)

    def record_event(self, event: torch.Event | None = None) -> torch.Event:
        """Records `event` (a new Event when None) at this point of the stream and returns it.

        torch.Stream's own takes a plain torch.Event only; CUDA's takes its Event subclass too, as this does."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def wait_stream(self, stream: torch.Stream) -> None:
        """Makes this stream wait for the work queued on `stream` so far."""
        self.wait_event(stream.record_event())

    @property
    def priority(self) -> int:
        return _C.stream_priority(self.stream_id)

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """(least, greatest) priority a stream can have, as torch.cuda.Stream.priority_range() orders them."""
        return _C.PRIORITY_RANGE

    def __repr__(self) -> str:
        return f"<torch.openreg.Stream device=openreg:{self.device_index} stream_id={self.stream_id}>"


class Event(torch.Event):
    """An openreg event: a marker in a stream that can be waited on and timed."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                external: bool = False):
        # `external`, which CUDA needs to time events recorded in a graph capture, changes nothing: openreg's time
        # there anyway.
        if interprocess:
            raise ValueError("openreg events cannot be shared between processes: use interprocess=False")
        return super().__new__(cls, device=_TYPE, enable_timing=enable_timing, blocking=blocking)

    @property
    def device(self) -> torch.device | None:
        """The device of the stream it was recorded on; None until it is recorded, as torch.cuda.Event's."""
        return None if self.event_id == 0 else super().device

    def __repr__(self) -> str:
        if self.event_id == 0:
            return "<torch.openreg.Event uninitialized>"
        return f"<torch.openreg.Event device={self.device} event_id={self.event_id:#x}>"

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds between this event and `end_event`; both must be
        timed, recorded and complete."""
        return _C.elapsed_time(self, end_event)


def _wrap(device_index: int, stream_id: int) -> Stream:
    return Stream(stream_id=stream_id, device_index=device_index, device_type=_C.DEVICE_TYPE)


def current_stream(device: _DeviceLike = None) -> Stream:
    idx = _index(device)
    return _wrap(idx, _C.current_stream(idx))


def default_stream(device: _DeviceLike = None) -> Stream:
    return _wrap(_index(device), 0)


def set_stream(stream: torch.Stream) -> None:
    """Makes `stream` the current stream of its device, and that device the current one, as torch.cuda.set_stream
    does."""
    if stream is not None:
        _C.set_stream(stream.device_index, stream.stream_id)  # checks the stream
        _C.set_device(stream.device_index)


class StreamContext:
    """Selects `stream` (and its device) for the work queued inside the block."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.prev_device = -1
        self.prev_stream = None

    def __enter__(self):
        if self.stream is None:
            return self
        prev_device = _C.current_device()
        prev_stream = _C.current_stream(self.stream.device_index)  # checks the device
        _C.set_stream(self.stream.device_index, self.stream.stream_id)  # checks the stream
        _C.set_device(self.stream.device_index)  # a context that fails to enter changes nothing
        self.prev_device, self.prev_stream = prev_device, prev_stream
        return self

    def __exit__(self, *exc) -> bool:
        if self.stream is not None:
            _C.set_stream(self.stream.device_index, self.prev_stream)
            _C.set_device(self.prev_device)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)
