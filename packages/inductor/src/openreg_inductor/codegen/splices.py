"""Edits of the code Inductor generates. Each names what it is for and fails loudly, on a torch that generates
something else, instead of leaving the code unedited."""

from __future__ import annotations


def replace_once(code: str, old: str, new: str, what: str) -> str:
    """`code` with `old`, which it must hold exactly once, replaced by `new`; `what` says what the edit is for."""
    found = code.count(old)
    if found != 1:
        seen = "it is not there" if found == 0 else f"it is there {found} times"
        raise RuntimeError(f"this torch is not supported: {what} (expected to find {old!r} once in Inductor's "
                           f"generated code; {seen}). Install the openreg release built for this torch.")
    return code.replace(old, new)
