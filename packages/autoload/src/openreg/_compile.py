"""torch.compile on openreg: the device's lazy Inductor hook, its options, and a clear error without the
compile layer.

`backend_init` is `torch.openreg._inductor_backend_init`, PyTorch's hook for initialising a device's
Inductor backend at the first compilation (torch calls it where it knows it; `_torch_patches` makes
2.13 and 2.14 call it too). With openreg-inductor it registers that layer's codegen and config; without
it, or when openreg cannot load, it registers stand-ins that raise `CompileUnavailable`, naming the
fix, once Inductor uses them for an openreg graph. CPU graphs never use them, so torch.compile on CPU
tensors works as usual.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import threading
import typing
from typing import Any

from . import _layers, _state

# The codegen torch (2.13/2.14) asks the PrivateUse1 device module for with a plain getattr
# (`torch.utils.backend_registration._get_custom_mod_func`); answered from the registration.
PROBED = {"Scheduling": "scheduling", "PythonWrapperCodegen": "wrapper_codegen",
          "CppWrapperCodegen": "cpp_wrapper_codegen", "WrapperFxCodegen": "fx_wrapper_codegen"}
OPTION_PREFIX = "openreg."

_lock = threading.RLock()  # concurrent first compilations wait for one initialisation
_initialising = False
_import_error: Exception | None = None


def backend_init() -> None:
    """Registers openreg with Inductor (and Dynamo), or stand-ins that explain why it cannot compile.
    Raises what the compile layer's registration raises; the next compilation then tries again."""
    global _initialising
    from torch._inductor.codegen.common import get_scheduling_for_device, register_backend_for_device

    with _lock:
        if _initialising or get_scheduling_for_device("openreg") is not None:
            return  # done, or re-entered from the compile layer's own imports
        _initialising = True
        try:
            layer = _compile_layer()
            if layer is None:
                register_backend_for_device("openreg", *(_StandIn(name, (), {"__module__": __name__})
                                                         for name in ("Scheduling", "PythonWrapperCodegen",
                                                                      "CppWrapperCodegen")))
                return
            backend = importlib.import_module(f"{layer.__name__}.backend")
            backend.prepare()
            register_backend_for_device("openreg", backend.Scheduling, backend.PythonWrapperCodegen,
                                        backend.CppWrapperCodegen, device_custom_config=layer.config)
        finally:
            _initialising = False


def module_getattr(name: str):
    """`torch.openreg.__getattr__`: torch's codegen probes; every other missing name is an AttributeError."""
    if name in PROBED and not _initialising:
        import torch
        from torch._inductor.codegen.common import device_codegens

        if "openreg" not in device_codegens:
            torch.openreg._inductor_backend_init()  # the device's hook, whichever module holds it now
        if value := getattr(device_codegens.get("openreg"), PROBED[name], None):
            return value
    raise AttributeError(f"module 'torch.openreg' has no attribute {name!r}")


def _compile_layer():
    """openreg_inductor, or None when openreg cannot compile here (why: `reason()`)."""
    global _import_error
    if _state.problems() or _layers.package_dir(_layers.COMPILE) is None:
        return None
    try:  # a broken compile layer must not break compiling for the CPU
        return importlib.import_module(_layers.COMPILE.module)
    except Exception as exc:
        _import_error = exc
        return None


def register_device_interface() -> bool:
    """Registers Dynamo's device interface for openreg (so that device and stream calls in compiled functions
    trace); False without a working compile layer."""
    if _layers.package_dir(_layers.COMPILE) is None:
        return False
    try:  # a broken compile layer is reported when compiling
        importlib.import_module(f"{_layers.COMPILE.module}.device_interface").register()
    except Exception:
        return False
    return True


def supported() -> bool:
    """Whether torch.compile can compile for openreg here (loads openreg's layers to find out)."""
    return _compile_layer() is not None


def reason() -> str:
    if problems := _state.problems():
        return _state.describe(problems)
    if _import_error is not None:
        cause = f"{type(_import_error).__name__}: {_import_error}"
        return ("torch.compile on the openreg device needs the compile layer, and openreg-inductor failed to import "
                f"({cause}). Fix: {_layers.reinstall(_layers.COMPILE)}")
    return ('torch.compile on the openreg device needs the compile layer, which is not installed. Fix: '
            'pip install "openreg[compile]". (Eager execution on openreg and torch.compile on the CPU '
            'work without it.)')


def split_options(patches: dict[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Inductor's config patches, and openreg's `openreg.<key>` options (keys without the prefix)."""
    def is_ours(key) -> bool:  # other keys, of any type, are Inductor's to accept or refuse
        return isinstance(key, str) and key.startswith(OPTION_PREFIX)

    if not patches or not any(map(is_ours, patches)):
        return patches, {}
    ours = {k[len(OPTION_PREFIX):].replace("-", "_"): v for k, v in patches.items() if is_ours(k)}
    return {k: v for k, v in patches.items() if not is_ours(k)}, ours


def validate(options: dict[str, Any]) -> None:
    """Raises a RuntimeError naming the valid keys for an unknown `openreg.` option, or the valid values for a
    value of the wrong type or not among the option's `choices`."""
    layer = _compile_layer()
    if layer is None:
        raise RuntimeError(f"openreg options ({', '.join(OPTION_PREFIX + k for k in options)}) need the compile "
                           f"layer. {reason()}")
    valid = {k: v for k, v in layer.config.get_config_copy().items() if not k.startswith("_")}
    for key, value in options.items():
        if key not in valid:
            raise RuntimeError(f"Unknown option '{OPTION_PREFIX}{key}' for the openreg device. Valid options: "
                               + ", ".join(f"{OPTION_PREFIX}{k} (now {v!r})" for k, v in sorted(valid.items())))
        expected = layer.config.get_type(key)
        allowed = tuple(t for t in typing.get_args(expected) or (expected,) if isinstance(t, type))
        # bool is an int to isinstance (and True == 1 passes `choices`): an int option takes no bool
        if allowed and (not isinstance(value, allowed) or isinstance(value, bool) and bool not in allowed):
            names = " or ".join("None" if t is type(None) else t.__name__ for t in allowed)
            raise RuntimeError(f"Option '{OPTION_PREFIX}{key}' takes {names}, not {value!r}")
        choices = layer.config.choices(key)
        if choices is not None and value not in choices:
            listed = [f"{v!r} ({meaning})" for v, meaning in choices.items()]
            raise RuntimeError(f"Option '{OPTION_PREFIX}{key}' takes {', '.join(listed[:-1])} or {listed[-1]} "
                               f"on this host, not {value!r}")


def options(values: dict[str, Any]):
    """Patches openreg_inductor.config with `values` (validated) for the duration of a compilation."""
    if not values:
        return contextlib.nullcontext()
    validate(values)
    return _compile_layer().config.patch(values)


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
