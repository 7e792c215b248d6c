"""argparse types and arguments shared by the `openreg` command and the benchmark scripts."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path


def positive(kind: type, what: str):
    """An argparse type: a finite `kind` above 0 (a nan or infinite time would never end)."""

    def check(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return check


def output_file(text: str) -> Path:
    """An argparse type: a file that can be written, checked before minutes of work that it would receive."""
    path = Path(text)
    if path.is_dir():
        problem = "it is a folder: name a file in it"
    elif not path.parent.is_dir():
        problem = f"there is no folder {path.parent}: create it first, or name a file in an existing folder"
    elif not os.access(path if path.exists() else path.parent, os.W_OK):
        problem = "permission denied: name a file you can write"
    else:
        return path
    raise argparse.ArgumentTypeError(f"cannot write {text}: {problem}")


def add_timing_arguments(parser: argparse.ArgumentParser) -> None:
    """--json and --min-run-time, shared by `openreg bench` and benchmarks/*.py."""
    parser.add_argument("--json", type=output_file, metavar="PATH", help="also write the figures to PATH as JSON")
    parser.add_argument("--min-run-time", type=positive(float, "a finite number of seconds above 0, e.g. 0.5"),
                        default=0.5, metavar="SECONDS", help="minimum time spent timing each statement (default 0.5)")
