"""Graphs: torch.cuda's graph API (CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing,
make_graphed_callables) for openreg, over torch.accelerator.Graph, which the C++ glue implements with the core's
capture and replay."""

from __future__ import annotations

import types

import torch

from .. import _C
from ._devices import _lazy_init, _torch_cuda_implementation, current_device, is_initialized, synchronize
from .memory import empty_cache
from .streams import _TYPE, Stream, StreamContext, current_stream, stream


class OpenRegGraph(torch.accelerator.Graph):
    """torch.cuda.CUDAGraph's counterpart: captures the work queued on the current stream, replays it."""

    def __new__(cls, keep_graph: bool = False):
        _lazy_init()
        return super().__new__(cls, keep_graph)

    def __init__(self, keep_graph: bool = False):
        super().__init__(keep_graph)
        self._generator_states: list[torch.Generator] = []

    def capture_begin(self, pool: tuple[int, int] | None = None, capture_error_mode: str = "global") -> None:
        """Begins capturing the current stream's work; `pool` shares another graph's memory pool."""
        torch._C._acceleratorGraph.capture_begin(
            self, pool=self.graph_pool if pool is None else pool, capture_error_mode=capture_error_mode)
        for state in self._generator_states:
            _C.begin_capture(state)

    def register_generator_state(self, generator: torch.Generator) -> None:
        """As CUDAGraph's: the graph's captures may draw from `generator`'s state (its graphsafe_get_state() or
        clone_state() names one), and each replay moves that state on; the device's default generator is
        registered with every capture. Drawing from a state not registered is refused, as on CUDA."""
        if not isinstance(generator, torch.Generator) or generator.device.type != _TYPE:
            raise TypeError(f"register_generator_state takes an openreg generator (or its graphsafe_get_state() or "
                            f"clone_state()), not {generator!r}")
        if is_current_stream_capturing():
            raise RuntimeError("Cannot register the state during capturing stage: register generators with the "
                               "graph before capture_begin()")
        self._generator_states.append(generator.graphsafe_get_state())


class graph:
    """torch.cuda.graph's counterpart: captures the block's work into `openreg_graph`, on a side stream unless
    `stream` is given (graphs are not captured on the default stream), after synchronizing the device. The side
    stream is the current device's (torch.cuda.graph keeps one for whichever device was current first)."""

    default_capture_streams: dict[int, Stream] = {}

    def __init__(self, openreg_graph: OpenRegGraph, pool: tuple[int, int] | None = None,
                 stream: torch.Stream | None = None, capture_error_mode: str = "global",
                 enable_annotations: bool = False):
        if enable_annotations:
            raise NotImplementedError("enable_annotations records CUDA kernel annotations (a CUDA driver feature); "
                                      "openreg has none: leave it False")
        if stream is None:
            device = current_device()
            if device not in graph.default_capture_streams:
                graph.default_capture_streams[device] = Stream()
            stream = graph.default_capture_streams[device]
        self.openreg_graph = openreg_graph
        self.pool = pool
        self.capture_stream = stream
        self.capture_error_mode = capture_error_mode
        self._stream_ctx = None

    def __enter__(self) -> None:
        synchronize()
        empty_cache()
        self._stream_ctx = StreamContext(self.capture_stream)
        self._stream_ctx.__enter__()
        try:
            self.openreg_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self._stream_ctx.__exit__(None, None, None)
            raise

    def __exit__(self, *exc) -> bool:
        try:
            self.openreg_graph.capture_end()
        finally:
            self._stream_ctx.__exit__(*exc)
        return False


def graph_pool_handle() -> tuple[int, int]:
    """A memory pool id for several graphs to share (`pool=`), as torch.cuda.graph_pool_handle()."""
    return _C.graph_pool_handle()


def is_current_stream_capturing() -> bool:
    """Whether the current stream of the current device is capturing a graph."""
    return is_initialized() and _C.is_capturing(current_device())


class _TorchWithOpenRegGraphs(types.ModuleType):
    """torch, except that torch.cuda's graph API is openreg's."""

    cuda = types.SimpleNamespace(CUDAGraph=OpenRegGraph, graph=graph, graph_pool_handle=graph_pool_handle,
                                 synchronize=synchronize, Stream=Stream, stream=stream, current_stream=current_stream)

    def __getattr__(self, name: str):
        return getattr(torch, name)


def make_graphed_callables(callables, sample_args, *args, **kwargs):
    """torch.cuda.make_graphed_callables on openreg: graphed versions of functions or modules, whose forward and
    backward each replay one graph. It is torch's own implementation, run with openreg's graph API where it names
    torch.cuda's, so that it does what it does on CUDA in every torch release, with that release's arguments."""
    _lazy_init()
    run = _torch_cuda_implementation(torch.cuda.graphs.make_graphed_callables, torch=_TorchWithOpenRegGraphs("torch"),
                                     graph_pool_handle=graph_pool_handle)
    return run(callables, sample_args, *args, **kwargs)
