"""`openreg doctor`: what is installed, whether it loads, and the fix when it does not.

Also usable in a process of yours (`openreg.doctor.doctor()`), where it shows the modes in force.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

import torch

from . import _compile, _layers, _loader, _state
from ._layers import VERSION

GiB = 1 << 30


def doctor(require: list[str] | tuple[str, ...] = ()) -> int:
    """Prints the report; returns 0 when all is well, else 1 (each problem printed with its fix)."""
    problems: list[str] = []
    try:
        _loader.load()
    except _state.LoadError:
        pass  # listed below, layer by layer
    show("torch", f"{torch.__version__} ({_torch_build()})")
    show("python", f"{platform.python_version()} ({sys.executable})")
    show("openreg", VERSION)
    _report_layers(problems, require)
    _report_autoload(problems)
    if _state.loaded():
        _report_devices(problems)
    print()
    if not problems:
        print("No problems found.")
        return 0
    print(f"{len(problems)} problem{'s' if len(problems) > 1 else ''} found:")
    for problem in problems:
        print(f"  - {problem}")
    return 1


def show(label: str, value: object) -> None:
    print(f"{label:<16}{value}")


def _torch_build() -> str:
    if torch.version.cuda:
        accel = f"CUDA {torch.version.cuda}"
    elif getattr(torch.version, "hip", None):
        accel = f"ROCm {torch.version.hip}"
    else:
        accel = "CPU-only build"
    commit = (torch.version.git_version or "unknown")[:10]
    return f"{accel}, git {commit}{', debug' if torch.version.debug else ''}"


def _report_layers(problems: list[str], require) -> None:
    failed = {p.layer: p for p in _state.problems()}
    for layer in _layers.LAYERS:
        version = _layers.version(layer)
        if layer in failed:
            status = f"FAILED: {failed[layer].cause}"
            problems.append(str(failed[layer]))
        elif version is None:
            status = "not installed"
            if layer.name in require:
                fix = f"pip install {layer.distribution}"
                if layer is _layers.COMPILE:
                    fix = 'pip install "openreg[compile]"'
                problems.append(f"{layer.distribution} (the {layer.name} layer) is not installed. Fix: {fix}")
            elif layer is _layers.COMPILE:
                status += ' (torch.compile on openreg needs it: pip install "openreg[compile]")'
        elif layer is _layers.COMPILE:
            status = "installed" if _compile.supported() else f"installed, but unusable: {_compile.reason()}"
        else:
            status = "loaded" if layer.module in sys.modules else "installed, not loaded"
        if version is not None and version != VERSION:
            problems.append(f"{layer.distribution} {version} does not match openreg {VERSION}. "
                            f"Fix: pip install {layer.distribution}=={VERSION}")
        built = ""
        if layer.compiled and version is not None:
            built_for = getattr(sys.modules.get(layer.module), "BUILT_FOR_TORCH", None) or _layers.built_for(layer)
            built = f"built for torch {built_for or '?'}"
        show(f"  {layer.name}", f"{layer.distribution:<17}{version or '-':<8}{built:<24}{status}")


def _report_autoload(problems: list[str]) -> None:
    entry = [e for e in metadata.entry_points(group="torch.backends") if e.name == "openreg"]
    if not entry:
        problems.append("the torch.backends entry point `openreg` is not installed, so `import torch` does not "
                        "register the device. Fix: pip install --force-reinstall --no-deps openreg")
        show("autoload", "MISSING (no torch.backends entry point)")
    elif _loader.how_enabled() == "autoload":
        show("autoload", f"active (torch.backends entry point {entry[0].name} = {entry[0].value})")
    elif os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "1":
        show("autoload", "off (TORCH_DEVICE_BACKEND_AUTOLOAD=0): `import openreg` enables the device")
    else:
        show("autoload", "inactive: torch did not call the entry point; the device came from `import openreg`")


def settings_problem() -> str | None:
    """What a bad OPENREG_* variable breaks, in a message that names it; None when they are all valid.
    Needs openreg's layers loaded (each layer's settings are checked when the device starts)."""
    try:
        torch.openreg.init()
    except RuntimeError as exc:
        return f"the openreg device cannot start: {exc}"
    return None


def _report_devices(problems: list[str]) -> None:
    import openreg_runtime

    if problem := settings_problem():
        problems.append(problem)
        show("devices", "not checked: a setting is invalid (see below)")
        return
    count = torch.openreg.device_count()
    memory = [torch.openreg.get_device_properties(i).total_memory for i in range(count)]
    config = openreg_runtime._C.config()
    name = torch.openreg.get_device_name(0) if count else "openreg"
    sizes = sorted(set(memory))
    show("devices", f"{count} x {name}, " + ", ".join(f"{m / GiB:g} GiB" for m in sizes) + " each")
    show("modes", f"strict {_on_off(config.get('strict'))} (OPENREG_STRICT), "
                  f"launch blocking {_on_off(config.get('launch_blocking'))} (OPENREG_LAUNCH_BLOCKING), "
                  f"sync debug {SYNC_DEBUG_MODES[torch.openreg.get_sync_debug_mode()]} "
                  "(torch.openreg.set_sync_debug_mode), "
                  f"stream sanitizer {torch.openreg.get_stream_sanitizer()} "
                  "(OPENREG_SANITIZE, torch.openreg.set_stream_sanitizer), "
                  f"memory history {_on_off(openreg_runtime._C.is_recording_memory_history())} "
                  "(torch.openreg.memory._record_memory_history)")


SYNC_DEBUG_MODES = ("default", "warn", "error")


def _on_off(value) -> str:
    return "on" if value else "off"
