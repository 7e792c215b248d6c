"""The `openreg` command (also `python -m openreg`): doctor, demo, bench."""

from __future__ import annotations

import argparse
import os
import sys

import torch

from ._arguments import add_timing_arguments, output_file, positive
from ._layers import VERSION


def _openreg_device(text: str) -> torch.device:
    """An argparse type: an openreg device string (whether its index exists is known once the device starts)."""
    try:
        device = torch.device(text)
    except RuntimeError:
        device = None
    if device is None or device.type != "openreg":
        raise argparse.ArgumentTypeError(f"{text!r} is not an openreg device: use openreg or openreg:N "
                                         "(the CPU run to compare with is part of the demo)")
    return device


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openreg", description="openreg: a simulated PyTorch accelerator.")
    parser.add_argument("--version", action="version", version=f"openreg {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    doctor = commands.add_parser("doctor", help="check the installation: torch, layers, autoload, devices, modes",
                                 description="Reports torch, openreg's layers, autoload, the devices and the active "
                                             "modes; exits 1, with the fix, when something is wrong.")
    doctor.add_argument("--require", action="append", default=[], choices=["runtime", "eager", "compile"],
                        help="also fail when this layer is missing (repeatable)")

    demo = commands.add_parser("demo", help="train a small model on openreg and on the CPU, and compare",
                               description="Trains a small MLP on openreg (eagerly, then compiled when the compile "
                                           "layer is installed) and on the CPU, and compares losses and time.")
    demo.add_argument("--epochs", type=positive(int, "a whole number of epochs, 1 or more"), default=5,
                      help="epochs to train (default 5)")
    demo.add_argument("--device", type=_openreg_device, default="openreg",
                      help="the openreg device to train on (default openreg)")

    bench = commands.add_parser("bench", help="benchmark openreg against the CPU and print the ratios",
                                description="Times the same work on openreg and on the CPU in one run; reports "
                                            "openreg time / CPU time. Never fails on a timing.")
    bench.add_argument("--suite", action="append",
                       choices=["runtime", "eager", "latency", "graphs", "distributed", "compile", "sanitizer"],
                       help="run this suite only (repeatable; default: all but sanitizer, compile only with "
                            "openreg[compile])")
    add_timing_arguments(bench)
    bench.add_argument("--plot", type=output_file, metavar="PATH",
                       help='also write a PNG chart of the ratios to PATH (needs matplotlib: pip install '
                            '"openreg[plot]")')
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        if sys.stdout is not None:  # None when started with stdout closed (`>&-`)
            sys.stdout.flush()  # a closed pipe shows here, not at exit where it could not be caught
        return code
    except BrokenPipeError:  # the reader went away (`openreg doctor | head`): Python's documented recipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not fail again
        return 1


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "bench" and args.json and args.plot and args.json.resolve() == args.plot.resolve():
        parser.error(f"bench --json and --plot both name {args.json}: the chart would overwrite the figures; "
                     "give them different paths")
    if args.command == "doctor":
        from .doctor import doctor

        return doctor(require=args.require)
    from ._loader import LoadError, load
    from .doctor import settings_problem

    try:
        load()
        if problem := settings_problem():  # before any work, rather than a traceback in the middle of it
            print(f"openreg {args.command}: {problem}", file=sys.stderr)
            return 1
        return _run(args)
    except LoadError as exc:  # a layer cannot load: say so without a traceback (`openreg doctor` tells more)
        print(f"openreg {args.command}: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from .demo import demo

        return demo(epochs=args.epochs, device=args.device)
    from . import _compile
    from .bench import bench

    default = ["runtime", "eager", "latency", "graphs", "distributed", *(["compile"] if _compile.supported() else [])]
    return bench(suites=args.suite or default, json_path=args.json, plot_path=args.plot,
                 min_run_time=args.min_run_time)


if __name__ == "__main__":
    sys.exit(main())
