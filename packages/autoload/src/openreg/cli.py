"""The `openreg` command (also `python -m openreg`): doctor, demo, bench."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openreg", description="openreg: a simulated PyTorch accelerator.")
    parser.add_argument("--version", action="version", version=f"openreg {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    doctor = commands.add_parser("doctor", help="check the installation: torch, layers, autoload, devices, modes",
                                 description="Reports torch, openreg's layers, autoload, the devices and the active "
                                             "modes; exits 1, with the fix, when something is wrong.")
    doctor.add_argument("--require", action="append", default=[], choices=["runtime", "eager", "compile"],
                        help="also fail when this layer is missing (repeatable)")

    demo = commands.add_parser("demo", help="train a small model on openreg and on the CPU, and compare",
                               description="Trains a small MLP on openreg (eagerly, then compiled when the compile "
                                           "layer is installed) and on the CPU, and compares losses and time.")
    demo.add_argument("--epochs", type=int, default=5, help="epochs to train (default 5)")
    demo.add_argument("--device", default="openreg", help="the openreg device to train on (default openreg)")

    bench = commands.add_parser("bench", help="benchmark openreg against the CPU and print the ratios",
                                description="Times the same work on openreg and on the CPU in one run; reports "
                                            "openreg time / CPU time. Never fails on a timing.")
    bench.add_argument("--suite", action="append", choices=["runtime", "eager", "compile"],
                       help="run this suite only (repeatable; default: all, compile only with openreg[compile])")
    bench.add_argument("--json", type=Path, metavar="PATH", help="also write the figures to PATH as JSON")
    bench.add_argument("--plot", type=Path, metavar="PATH", help="also write a PNG chart of the ratios to PATH "
                                                                 '(needs matplotlib: pip install "openreg[plot]")')
    bench.add_argument("--min-run-time", type=float, default=0.5, metavar="SECONDS",
                       help="minimum time spent timing each statement (default 0.5)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "doctor":
        from .doctor import doctor

        return doctor(require=args.require)
    from ._loader import LoadError

    try:
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

    default = ["runtime", "eager", *(["compile"] if _compile.supported() else [])]
    return bench(suites=args.suite or default, json_path=args.json, plot_path=args.plot,
                 min_run_time=args.min_run_time)


if __name__ == "__main__":
    sys.exit(main())
