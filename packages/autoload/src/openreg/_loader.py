"""Registers the openreg device with torch and loads openreg's layers on first use.

`enable` runs at `import torch` (through the `torch.backends` entry point) or at `import openreg`,
and only does what is cheap: it names PrivateUse1 `openreg`, registers a stand-in `torch.openreg`
module and checks the installed layers without loading them. Torch calls `torch.openreg._lazy_init()`
before it creates the first tensor on the device; that, or any other use of `torch.openreg`, imports
the layers (`load`), after which the runtime's own device module takes the stand-in's place.

When a layer cannot load, `import torch` still works: one warning says which layer, why and the
fix, and using the device raises `LoadError` saying the same.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import types
import warnings
from pathlib import Path

import torch

from . import _compile, _distributed, _layers, _state, _torch_patches
from ._layers import Problem
from ._state import LoadError, LoadWarning

_lock = threading.RLock()
_how: str | None = None  # "autoload" or "import": how the device got enabled; None: not enabled
_loading = False
_warned = False
_refusal: torch.library.Library | None = None


def how_enabled() -> str | None:
    return _how


def enable(how: str) -> None:
    """Registers the device (idempotent). `how` is "autoload" from the entry point, else "import"."""
    global _how
    with _lock:
        if _how is not None:
            _how = "autoload" if how == "autoload" else _how
            return
        _how = how
        backend = torch._C._get_privateuse1_backend_name()
        if backend not in ("privateuseone", "openreg"):
            _warn(f"openreg cannot register its device: torch's PrivateUse1 backend is already {backend!r}, and a "
                  "process can have only one. Fix: import one PrivateUse1 backend per process (set "
                  "TORCH_DEVICE_BACKEND_AUTOLOAD=0 and import the one you want).")
            return
        _torch_patches.install(load)
        _distributed.register(load)
        current = torch.__dict__.get("openreg")
        if current is not None and current is sys.modules.get("openreg_runtime.device"):
            # The runtime was imported before us (autoload off): adopt it, load the rest now.
            _adopt(current)
            try:
                load()
            except LoadError:
                pass  # warned; using the device raises it
            return
        if backend != "openreg":
            torch.utils.rename_privateuse1_backend("openreg")
        if current is None:
            torch._register_device_module("openreg", _STAND_IN)
        _torch_patches.hand_over_device_module(_STAND_IN, _adopt)
        if not hasattr(torch.Tensor, "is_openreg"):
            torch.utils.generate_methods_for_privateuse1_backend(
                for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
            )
        if found := [p for p in map(_layers.check, _layers.REQUIRED) if p] or _load_lazy_library():
            _fail(found)
            _refuse_ops()


def _load_lazy_library() -> list[Problem]:
    """Loads the runtime's libopenreg_lazy (about a millisecond): torch's C++ registries then answer for openreg,
    so that C++ entry points used before the layers load (torch.Generator("openreg"), torch.Stream, torch.Event,
    Tensor.pin_memory, torch.accelerator.memory_*, gloo asking the current accelerator) load the runtime's C++
    themselves instead of failing. Returns what keeps it from loading."""
    import ctypes

    path = _layers.package_dir(_layers.RUNTIME) / "lib" / "libopenreg_lazy.so"
    try:
        ctypes.CDLL(str(path))
    except OSError as exc:
        return [Problem(_layers.RUNTIME, f"cannot load {path.name} ({exc})", _layers.reinstall(_layers.RUNTIME))]
    return []


def _refuse_ops() -> None:
    """Calls through torch.ops skip torch's lazy initialisation; libopenreg_lazy's fallback starts the layers for
    them, and without it they raise the load error too, not "Could not run ... 'PrivateUse1' backend"."""
    global _refusal
    _refusal = torch.library.Library("_", "IMPL")
    _refusal.fallback(lambda op, *args, **kwargs: load(), "PrivateUse1")


def load() -> None:
    """Imports the installed layers once; raises LoadError, naming what failed, when they cannot load."""
    global _loading
    if _state.found is None:
        with _lock:
            if _state.found is None and not _loading:  # re-entered while importing the layers: let it be
                _loading = True
                try:
                    found = _import_layers()
                finally:
                    _loading = False
                _state.found = found
                if found:
                    _fail(found)
                else:
                    _torch_patches.dynamo_ready()
    if _state.found:
        raise LoadError(_state.describe(_state.found))


def _import_layers() -> list[Problem]:
    if found := [p for p in map(_layers.check, _layers.REQUIRED) if p]:
        return found
    for layer in _layers.REQUIRED:
        try:
            importlib.import_module(layer.module)
        except Exception as exc:
            return [Problem(layer, f"failed to import ({type(exc).__name__}: {exc})", _layers.reinstall(layer))]
    return []


def _fail(found: list[Problem]) -> None:
    _state.found = found
    if torch.__dict__.get("openreg") is not _STAND_IN:  # the runtime's module, when only a layer above it failed
        torch.__dict__.pop("openreg", None)
        sys.modules.pop("torch.openreg", None)
        torch._register_device_module("openreg", _STAND_IN)
    _warn(_state.describe(found) + "\n`import torch` works; using the openreg device raises this error.")


def _warn(message: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(message, LoadWarning, stacklevel=_outside_stacklevel())


def _outside_stacklevel() -> int:
    """The stacklevel of the first frame outside openreg, torch and importlib: the user's `import torch`
    or first use of the device, which the warning then points at."""
    inside = tuple(str(Path(m.__file__).parent) for m in (sys.modules[__package__], torch, importlib))
    inside += ("<frozen importlib",)
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(inside):
        frame = frame.f_back
        # warnings.warn does not count importlib's own frames
        level += frame is not None and not frame.f_code.co_filename.startswith("<frozen importlib._bootstrap")
    return level if frame is not None else 2


def _device() -> types.ModuleType:
    return sys.modules["openreg_runtime.device"]


def _adopt(device: types.ModuleType) -> None:
    """Makes the runtime's device module load the layers above it on first use, and gives it the lazy
    Inductor hook (whoever imported the runtime: us, a user, or a layer above it)."""
    original = device._lazy_init
    if getattr(original, "_openreg_loads_layers", False):
        return

    def _lazy_init() -> None:
        load()
        original()

    _lazy_init._openreg_loads_layers = True
    device._lazy_init = _lazy_init
    device._inductor_backend_init = _compile.backend_init
    if "__getattr__" not in vars(device):
        device.__getattr__ = _compile.module_getattr


class _DeviceModule(types.ModuleType):
    """`torch.openreg` until the layers load (and for good when they cannot): the first use loads them and
    forwards to the runtime's device module; when they cannot load, using it raises LoadError."""

    def _lazy_init(self) -> None:
        load()
        _device()._lazy_init()

    def is_available(self) -> bool:
        if _state.found is None and not any(name.startswith("OPENREG_") for name in os.environ):
            # Installed, intact as far as can be seen without loading, and default settings: yes. Cheap, because
            # torch asks on CPU-only paths too (every optimizer step checks the accelerator).
            return True
        try:
            load()
        except LoadError:
            return False
        return _device().is_available()

    def is_initialized(self) -> bool:
        return _state.loaded() and _device().is_initialized()

    @property
    def _initialized(self) -> bool:  # torch.cuda's flag, which torch.utils.checkpoint reads without loading us
        return self.is_initialized()

    def _is_in_bad_fork(self) -> bool:
        return _state.loaded() and _device()._is_in_bad_fork()

    def _inductor_backend_init(self) -> None:
        _compile.backend_init()

    def __dir__(self) -> list[str]:
        """The runtime's names (loading the layers, as any other use does): tab completion and `dir()` see what
        `torch.openreg.<name>` gives."""
        try:
            load()
        except LoadError:
            return super().__dir__()
        return dir(_device())

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name in _compile.PROBED:
            return _compile.module_getattr(name)
        load()
        return getattr(_device(), name)


_STAND_IN = _DeviceModule("torch.openreg", __doc__)
