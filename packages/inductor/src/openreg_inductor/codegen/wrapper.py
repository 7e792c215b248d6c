"""The Python wrapper for graphs on openreg: Inductor's, with openreg's kernels loaded through
`openreg_inductor.launch` (so that calling one queues it on the current stream)."""

from __future__ import annotations

from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V

from .. import config, launch
from .splices import replace_once

_CPU_LOADER = "async_compile.cpp_pybinding("


def on_openreg(device=None) -> bool:
    """Whether `device` (default: the one being generated for) is an openreg device."""
    device = device or V.graph.current_device
    return device is not None and device.type == "openreg"


def on_host(arg) -> bool:
    """Whether kernel argument `arg` names a CPU tensor (a 0-d one: Inductor lets only those into device
    kernels). The kernel runs later, on the stream, so it must not read host memory the caller owns."""
    buffer = V.graph.try_get_buffer(arg) if isinstance(arg, str) else None
    device = buffer.get_device() if buffer is not None else None
    return device is not None and device.type == "cpu"


def queued(kernel_body: str) -> str:
    """An openreg kernel's definition (`async_compile.cpp_pybinding(...)`), made to load the kernel so that calling it
    queues it on the current stream."""
    return replace_once(kernel_body, _CPU_LOADER, launch.loader(launch.launch_flags(), config.simdlen),
                        "openreg cannot load its kernels so that calling one queues it on the stream")


def allocated_on(device, line: str) -> str:
    """An allocation on openreg `device`, `line`, made to name the device's index: Inductor names only the type of a
    device it does not know. A torch that names the device itself (as for one without an index) needs no edit."""
    if f"device='{device}'" in line:
        return line
    return replace_once(line, f"device='{device.type}'", f"device='{device}'",
                        "openreg cannot allocate buffers on the graph's device")


def flush_kernels() -> None:
    """Emits the kernels Inductor's C++ scheduling still holds (it groups consecutive nodes into one
    kernel until a device boundary), so that they land inside the device or stream context they belong to.
    Buffers are left for the scheduler to free: the node being generated may still read some."""
    for backend in V.graph.scheduler.backends.values():
        backend.flush()


class KernelOrder:
    """Keeps held kernels in program order for every wrapper of openreg graphs: before a stream or device
    context ends or begins, and before an extern call without a device (which the scheduler does not
    flush for, e.g. a synchronize traced from torch.openreg.synchronize())."""

    def generate_fallback_kernel(self, *args, **kwargs):
        flush_kernels()
        return super().generate_fallback_kernel(*args, **kwargs)

    def generate_extern_kernel_alloc(self, *args, **kwargs):
        flush_kernels()
        return super().generate_extern_kernel_alloc(*args, **kwargs)

    def codegen_cuda_stream_enter(self, *args, **kwargs):
        flush_kernels()
        return super().codegen_cuda_stream_enter(*args, **kwargs)

    def codegen_cuda_stream_exit(self, *args, **kwargs):
        flush_kernels()
        return super().codegen_cuda_stream_exit(*args, **kwargs)

    def codegen_device_guard_exit(self, *args, **kwargs):
        flush_kernels()
        return super().codegen_device_guard_exit(*args, **kwargs)


class _OpenRegKernels(KernelOrder):
    """What both Python wrappers (graph and subgraph) do differently for openreg kernels."""

    def define_kernel(self, kernel_name, kernel_body, metadata=None, gpu=True, cpp_definition=None):
        # The scheduler defines each kernel while its device is current: a graph mixing cpu and openreg
        # keeps plain loading for its CPU kernels.
        if not gpu and on_openreg():
            kernel_body = queued(kernel_body)
        super().define_kernel(kernel_name, kernel_body, metadata, gpu, cpp_definition)

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if not triton and on_openreg(device):
            # The binding queues the kernel; CPU scalars travel to the device first (in stream order).
            args = [f"{a}.to('{device}')" if on_host(a) else a for a in call_args]
            self.writeline(self.wrap_kernel_call(kernel_name, args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)


    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None, is_pinned=False):
        line = super().make_allocation(name, device, dtype, shape, stride, allocation_shape, is_pinned)
        return allocated_on(device, line) if device.type == "openreg" else line


class OpenRegSubgraphWrapper(_OpenRegKernels, SubgraphPythonWrapperCodegen):
    pass


class OpenRegPythonWrapper(_OpenRegKernels, PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return OpenRegSubgraphWrapper(subgraph_name, parent_wrapper, partition_signatures)
        return OpenRegPythonWrapper()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline("from openreg_inductor.launch import cpp_pybinding as openreg_cpp_pybinding")
