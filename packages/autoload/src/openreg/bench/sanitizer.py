"""The stream sanitizer's cost: the eager suite's cases with the sanitizer off and on (OPENREG_SANITIZE=streams),
each against the CPU in the same run. Off, openreg's ratios are the eager suite's; on, the goal is at most 3x the
off ratio."""

import dataclasses

import torch

from . import eager
from .harness import Case, Suite


def _mode(mode: str) -> str:
    return f"torch.openreg.synchronize(); torch.openreg.set_stream_sanitizer({mode!r})"


def cases() -> list[Case]:
    out = []
    for case in eager.cases():
        for mode, goal in [("off", case.goal), ("error", "<= 3x the off ratio")]:
            label = "on" if mode == "error" else mode
            out.append(dataclasses.replace(case, name=f"{case.name}, sanitizer {label}", goal=goal,
                                           setup=_mode(mode) + "\n" + (case.setup or "")))
    torch.openreg.set_stream_sanitizer("off")
    return out


def versions() -> dict[str, str]:
    return eager.versions()


SUITE = Suite("sanitizer", "openreg eager with the stream sanitizer off and on vs CPU", cases, versions)
