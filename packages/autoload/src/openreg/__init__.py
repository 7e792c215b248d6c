"""openreg: a simulated PyTorch accelerator that runs on the host CPU.

Installed, it is there at `import torch`: torch calls the `torch.backends` entry point `_autoload`,
which registers the `openreg` device and defers the rest to first use, so that

    import torch
    torch.ones(2, device="openreg")

works with no other import. With TORCH_DEVICE_BACKEND_AUTOLOAD=0, `import openreg` does the same.
`openreg.init()` loads the layers up front. The command line is `openreg` (or `python -m openreg`).
"""


def _autoload() -> None:
    """The `torch.backends` entry point, called by torch at `import torch`. Cheap, and never raises."""
    _enable("autoload")


_broken = False


def _enable(how: str) -> None:
    global _broken
    if _broken:
        return  # warned already
    try:
        from . import _loader

        _loader.enable(how)
    except Exception as exc:  # a broken openreg must never break `import torch`
        import warnings

        _broken = True

        warnings.warn(
            f"openreg could not register its device ({type(exc).__name__}: {exc}). "
            "Fix: reinstall it: pip install --force-reinstall openreg",
            RuntimeWarning,
            stacklevel=3,
        )


def init() -> None:
    """Loads openreg's layers and starts the device now rather than on first use (`torch.openreg.init()`);
    raises `openreg.LoadError` saying what failed."""
    from ._loader import load

    load()
    torch.openreg.init()


def __getattr__(name: str):
    # Looked up lazily: nothing at module level may raise, or `import torch` would fail with it (a checkout
    # installed in editable mode but never built has no _version.py; the loader warns about it).
    if name in ("LoadError", "LoadWarning"):
        from . import _state

        return getattr(_state, name)
    if name == "__version__":
        from ._version import __version__  # written at build time from the checkout's VERSION file

        return __version__
    raise AttributeError(f"module 'openreg' has no attribute {name!r}")


__all__ = ["LoadError", "LoadWarning", "init"]

# `_autoload` is defined above, before torch is imported: when `import openreg` comes first, torch's
# autoload imports this (partly initialised) module and calls `_autoload` from it.
import torch  # noqa: E402

_enable("import")
