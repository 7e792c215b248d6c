"""openreg._torch_patches, the one module that changes torch internals: each patch lands whether torch's
modules are imported after openreg (the import watcher) or before it, and only once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import ModuleType

CHECK = """
import torch._inductor.codegen.common as common, torch._inductor.compile_fx as compile_fx
import torch._inductor.scheduler as scheduler, torch._inductor.utils as utils
import torch._inductor.codecache as codecache, torch.export.pt2_archive._package as pt2_archive
import torch.nn.attention.flex_attention as flex, torch._inductor.lowering as lowering
import torch._subclasses.fake_impls as fake_impls, torch._dynamo.device_interface as device_interface
patched = {
    "compile_fx": compile_fx.compile_fx._openreg_original,
    "apply_options": torch._TorchCompileInductorWrapper.apply_options._openreg_original,
    "is_cpu": scheduler.BaseSchedulerNode.is_cpu._openreg_original,
    "combo_groups": scheduler.ForeachKernelSchedulerNode.group_algorithm_for_combo_kernels._openreg_original,
    "device_need_guard": scheduler.device_need_guard._openreg_original,
    "get_current_backend": common.get_current_backend._openreg_original,
    "_get_cpp_wrapper_header": codecache._get_cpp_wrapper_header._openreg_original,
    "_load_aoti": pt2_archive._load_aoti._openreg_original,
    "flex_validate_device": flex._validate_device._openreg_original,
    "flex_kernel_options": flex._apply_kernel_options._openreg_original,
    "flex_lowering": lowering.lowerings[torch.ops.higher_order.flex_attention]._openreg_original,
    "is_gpu": lowering.is_gpu._openreg_original,
    "get_interface_for_device": device_interface.get_interface_for_device._openreg_original,
    "fake_conv": fake_impls.op_implementations_dict[torch.ops.aten.convolution.default]._openreg_original,
}
assert not hasattr(patched["fake_conv"], "_openreg_original")
assert utils.get_current_backend is common.get_current_backend
assert compile_fx.get_interface_for_device is device_interface.get_interface_for_device  # imported by name
assert not hasattr(compile_fx.compile_fx._openreg_original, "_openreg_original")  # not wrapped twice
print(sorted(patched))
"""


def _run(prelude: str, env: dict[str, str] | None = None) -> list[str]:
    code = textwrap.dedent(prelude) + CHECK
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


EXPECTED = ["['_get_cpp_wrapper_header',", "'_load_aoti',", "'apply_options',", "'combo_groups',", "'compile_fx',",
            "'device_need_guard',", "'fake_conv',", "'flex_kernel_options',", "'flex_lowering',",
            "'flex_validate_device',", "'get_current_backend',", "'get_interface_for_device',", "'is_cpu',",
            "'is_gpu']"]


def test_patches_land_when_inductor_is_imported_after_openreg():
    prelude = "import torch, openreg, openreg._torch_patches as p, openreg._loader as loader; p.install(loader.load)"
    assert _run(prelude) == EXPECTED


def test_patches_land_when_inductor_was_imported_before_openreg():
    prelude = """
        import torch, torch._inductor.compile_fx, torch._inductor.scheduler  # before openreg
        import torch._inductor.codecache, torch.export.pt2_archive._package
        import torch.nn.attention.flex_attention, torch._inductor.kernel.flex.flex_attention
        import openreg
    """
    assert _run(prelude, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}) == EXPECTED


def test_inductor_behaviour_for_other_devices_is_unchanged():
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import torch
        import torch._inductor.utils as utils
        print(utils.device_need_guard("cuda"), utils.device_need_guard("cpu"), utils.device_need_guard("openreg"))
        print(utils.get_current_backend("cpu"), utils.get_current_backend("openreg"))
    """)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["True", "False", "True", "cpp", "cpp"]


def test_dynamos_device_interface_answers_for_openreg_before_the_device_is_used_as_for_cuda():
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import torch
        from torch._dynamo.device_interface import get_interface_for_device
        print(get_interface_for_device("cuda").__name__)
        interface = get_interface_for_device("openreg")  # before anything touched the device
        print(interface.device_count() == torch.openreg.device_count(), torch.openreg.is_initialized())
        print(get_interface_for_device(torch.device("openreg", 1)) is interface, interface.current_device())
    """)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["CudaInterface", "True", "False", "True", "0"]


def _module(source: str) -> ModuleType:
    module = ModuleType("fake_inductor_common")
    exec(compile(textwrap.dedent(source), module.__name__, "exec"), module.__dict__)
    return module


def test_a_torch_that_calls_the_hook_is_recognised_by_its_code_not_its_text():
    from openreg import _torch_patches

    assert _torch_patches.calls_hook(_module("""
        def init_backend_registration(device_module):
            device_module._inductor_backend_init()
    """))
    assert _torch_patches.calls_hook(_module("""
        class Registry:
            def get(self, device_module):
                return lambda: device_module._inductor_backend_init()
    """))
    assert not _torch_patches.calls_hook(_module('''
        def init_backend_registration(device_module):
            """A later torch may call _inductor_backend_init here."""  # text alone is not a call
            return device_module
    '''))
    assert _torch_patches.torch_calls_hook() is False  # 2.13 and 2.14 do not, hence patch 1
