"""What openreg registers with Inductor: the codegen classes, and `prepare()` for the device op
overrides. `torch.openreg._inductor_backend_init` (in the autoload layer) imports this at the first
Inductor compilation and registers it with the device's config. Nothing here touches the device, so
compiling for the CPU does not load openreg's layers; Dynamo's device interface (`device_interface`)
is registered once they are loaded."""

from __future__ import annotations

from torch._inductor.codegen.common import register_device_op_overrides

from .codegen.cpp_wrapper import OpenRegCppWrapper as CppWrapperCodegen
from .codegen.device_op_overrides import OpenRegDeviceOpOverrides
from .codegen.scheduling import OpenRegScheduling as Scheduling
from .codegen.wrapper import OpenRegPythonWrapper as PythonWrapperCodegen


def prepare() -> None:
    register_device_op_overrides("openreg", OpenRegDeviceOpOverrides())


__all__ = ["CppWrapperCodegen", "PythonWrapperCodegen", "Scheduling", "prepare"]
