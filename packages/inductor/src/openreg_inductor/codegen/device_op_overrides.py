"""The snippets of device code Inductor's wrappers emit for openreg (device guards, synchronisation)."""

from torch._inductor.codegen.common import DeviceOpOverrides


class OpenRegDeviceOpOverrides(DeviceOpOverrides):
    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from openreg_inductor.device_interface import get_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.openreg.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.openreg.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.openreg.device({device_idx})"

    def current_stream(self) -> str:
        return "torch.openreg.current_stream()"

    def cpp_device_guard(self) -> str:
        return "openreg_inductor::DeviceGuard"

    def cpp_aoti_device_guard(self) -> str:
        return "openreg_inductor::DeviceGuard"

    def cpp_aoti_stream_guard(self) -> str:
        return "openreg_inductor::DeviceGuard"

    def cpp_kernel_type(self) -> str:
        return "void*"  # openreg kernels are host functions (the C++ wrappers call them through launch)
