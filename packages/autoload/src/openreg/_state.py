"""Whether openreg's layers are loaded, and what keeps them from loading. `_loader` (the composition root) alone
loads the layers and writes this; the modules below it only read it."""

from __future__ import annotations

from ._layers import Problem


class LoadError(RuntimeError):
    """An openreg layer cannot load: the message names the layer, the cause and the fix."""


class LoadWarning(RuntimeWarning):
    """Warned once when an openreg layer cannot load."""


LoadError.__module__ = LoadWarning.__module__ = "openreg"  # where users find them


# None until the layers are loaded (then []) or found broken.
found: list[Problem] | None = None


def problems() -> list[Problem]:
    """What keeps the layers from loading, as far as is known now."""
    return list(found or [])


def loaded() -> bool:
    return found == []


def describe(problems: list[Problem]) -> str:
    if len(problems) == 1:
        return f"the openreg device is unavailable: {problems[0]}"
    return "the openreg device is unavailable:\n" + "\n".join(f"  - {p}" for p in problems)
