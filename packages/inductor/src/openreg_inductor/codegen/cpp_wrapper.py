"""The C++ wrapper for graphs on openreg (`torch._inductor.config.cpp_wrapper = True`, and AOTInductor):
Inductor's CPU one, with openreg's device in allocations and guards, and kernel calls queued on the
current openreg stream through `launch.LAUNCH_CPP`."""

from __future__ import annotations

from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.virtualized import V

from .. import launch
from .wrapper import KernelOrder, on_host, on_openreg


class OpenRegCppWrapper(KernelOrder, CppWrapperCpu):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if V.graph.aot_mode:
            # torch's AOTInductor runtime (aoti_runtime/model_base.h, parse_device_str) accepts models for cpu,
            # cuda, xpu and mps only, and its model runners are registered for those devices alone.
            raise NotImplementedError(
                "AOTInductor cannot package a model for the openreg device: torch's AOTInductor runtime only "
                "accepts cpu, cuda, xpu and mps models. Use torch.compile (or torch._inductor.compile_fx) on "
                "openreg, or export the model for the CPU.")
        return OpenRegCppWrapper()

    def write_header(self) -> None:
        super().write_header()
        if not V.graph.is_const_graph:
            self.header.splice(launch.LAUNCH_CPP)

    def add_device_include(self, device: str) -> None:
        super().add_device_include("cpu" if device == "openreg" else device)  # openreg kernels are CPU C++

    def codegen_device(self, device) -> str:
        if not on_openreg(device):
            return super().codegen_device(device)
        self.used_cached_devices.add("privateuse1")
        return f"cached_torch_device_type_privateuse1, {device.index or 0}"

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, arg_types=None,
                                     **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if triton or not on_openreg(device):
            return super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton,
                                                        arg_types=arg_types, **kwargs)
        args = [self._kernel_arg(a, t) for a, t in zip(call_args, arg_types, strict=True)]
        self.writeline(f'openreg_inductor::launch("{kernel_name}", {launch.launch_flags()}, '
                       f'{", ".join([kernel_name, *args])});')

    @staticmethod
    def _kernel_arg(arg, arg_type) -> str:
        if not (isinstance(arg_type, str) and "*" in arg_type):
            return str(arg)
        pointer = f"({arg_type})({arg}.data_ptr())"
        if on_host(arg):  # a CPU scalar: the queued kernel gets a copy of its value (the caller owns the tensor)
            return f"openreg_inductor::HostValue({pointer})"
        return pointer

    def generate_c_shim_extern_kernel_call(self, kernel: str, args, device: str, **kwargs) -> None:
        if device == "openreg":
            # torch's C shims for a device call that device's ATen kernels directly (at::cpu::...), bypassing the
            # dispatcher, so they would run outside openreg's streams and allocate outputs on the CPU.
            raise NotImplementedError(
                f"openreg's C++ wrapper cannot call {kernel.removeprefix('aoti_torch_openreg_')} yet: it runs the "
                "kernels Inductor generates, not ATen ops "
                "(matmul, convolution and other library calls). Compile with the Python wrapper "
                "(torch._inductor.config.cpp_wrapper = False, the default) for this graph.")
        super().generate_c_shim_extern_kernel_call(kernel, args, device, **kwargs)
