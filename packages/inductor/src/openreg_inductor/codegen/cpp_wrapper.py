"""The C++ wrapper for graphs on openreg (`torch._inductor.config.cpp_wrapper = True`, and AOTInductor):
Inductor's CPU one, with openreg's device in allocations and guards, kernel calls queued on the
current openreg stream (include/openreg_inductor/launch.h), and ATen calls through openreg's C shims (`c_shims`)."""

from __future__ import annotations

from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.utils import make_codegen_buffer
from torch._inductor.virtualized import V

from .. import headers, launch
from . import aoti_model, c_shims
from .wrapper import KernelOrder, on_host, on_openreg


class OpenRegCppWrapper(KernelOrder, CppWrapperCpu):
    device = "openreg"  # what Inductor names its builds and AOTInductor's constants after (CppWrapperCpu: "cpu")

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        return OpenRegCppWrapper()

    def codegen_model_constructor(self) -> None:
        prior, self.prefix = self.prefix, make_codegen_buffer()
        super().codegen_model_constructor()
        code, self.prefix = self.prefix.getvalue(), prior
        self.prefix.splice(aoti_model.constructor(code))

    def write_header(self) -> None:
        super().write_header()
        if not V.graph.is_const_graph:
            # aoti_model.h includes launch.h.
            self.header.splice(headers.text(aoti_model.HEADER if V.graph.aot_mode else launch.LAUNCH_HEADER))

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

    def finalize_prefix(self) -> None:
        # Called once every line of the wrapper is written; the shims go ahead of the code that calls them.
        shims = c_shims.definitions(self.prefix.getvalue() + self.wrapper_call.getvalue())
        if shims:
            prior, self.prefix = self.prefix, make_codegen_buffer()
            self.prefix.splice(shims)
            self.prefix.splice(prior)
        super().finalize_prefix()
