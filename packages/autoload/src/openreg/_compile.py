"""torch.compile on openreg: hands Inductor the compile layer's codegen, or a clear error without it.

Inductor (torch 2.13/2.14) asks the PrivateUse1 device module for its codegen classes with a plain
getattr (`torch.utils.backend_registration._get_custom_mod_func`, from `init_backend_registration`),
for every compiled graph, CPU graphs included. `module_getattr`, installed as `torch.openreg`'s
module-level __getattr__, answers those names: with openreg-inductor from it, and otherwise with
stand-ins that are harmless to register and raise `CompileUnavailable` once Inductor uses them for
an openreg graph. CPU graphs never use them, so torch.compile on CPU tensors works as usual.
"""

from __future__ import annotations

import functools
import importlib
import inspect

from . import _layers

PROBED = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def module_getattr(name: str):
    """`torch.openreg.__getattr__`: Inductor's codegen probes; every other missing name is an AttributeError."""
    if name in PROBED:
        return codegen(name)
    raise AttributeError(f"module 'torch.openreg' has no attribute {name!r}")


_import_error: Exception | None = None


def codegen(name: str):
    """The compile layer's `name`, or a stand-in that raises the reason there is none once used."""
    global _import_error
    if _layers.package_dir(_layers.COMPILE) is not None:
        try:  # a broken compile layer must not break compiling for the CPU
            value = getattr(importlib.import_module(_layers.COMPILE.module), name, None)
        except Exception as exc:
            _import_error, value = exc, None
        if value is not None:
            return value
    return _StandIn(name, (), {"__module__": __name__})


def supported() -> bool:
    """Whether torch.compile can compile for openreg here (the compile layer provides Inductor codegen)."""
    return not isinstance(codegen("Scheduling"), _StandIn)


def reason() -> str:
    from . import _loader

    if problems := _loader.problems():
        return _loader.describe(problems)
    version = _layers.version(_layers.COMPILE)
    if _import_error is not None:
        cause = f"{type(_import_error).__name__}: {_import_error}"
        return ("torch.compile on the openreg device needs the compile layer, and openreg-inductor failed to import "
                f"({cause}). Fix: {_layers.reinstall(_layers.COMPILE)}")
    if version is None:
        return ('torch.compile on the openreg device needs the compile layer, which is not installed. Fix: '
                'pip install "openreg[compile]". (Eager execution on openreg and torch.compile on the CPU '
                'work without it.)')
    return (f"torch.compile on the openreg device is not supported by the installed openreg-inductor {version}: "
            "it does not provide Inductor codegen for openreg yet. Run the model eagerly (without torch.compile), "
            "or compile with backend='aot_eager'.")


@functools.cache
def _error_type() -> type[Exception]:
    # A ShortenTraceback: Dynamo passes it through unwrapped and cuts the traceback to the frame that raised
    # it, so the user sees this message and no Inductor stack (TORCHDYNAMO_VERBOSE=1 shows everything).
    from torch._dynamo.exc import ShortenTraceback

    class CompileUnavailable(ShortenTraceback):
        """torch.compile cannot compile for the openreg device in this installation."""

    CompileUnavailable.__module__, CompileUnavailable.__qualname__ = "openreg", "CompileUnavailable"
    return CompileUnavailable


def _unavailable():
    raise _error_type()(reason(), first_useful_frame=inspect.currentframe())


class _StandIn(type):
    """A codegen class that only exists to say why there is none: using it in any way raises."""

    def __call__(cls, *args, **kwargs):
        _unavailable()

    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        _unavailable()
