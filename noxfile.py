"""Sessions for openreg: `nox -s lint tests` (what CI runs), `nox -s demo`, `nox -s bench`.

Every session that needs openreg installs an exact torch release, builds the four wheels
against it (`pip wheel --no-build-isolation`, each layer against the installed layers below it;
the build hooks keep their objects per torch release) and installs them from those files only,
as a user would get them. Tests run from a scratch directory so that the source tree (whose runtime
may hold no compiled modules, or ones built for another torch) cannot shadow the installed wheels.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox
from nox.command import CommandFailed

ROOT = Path(__file__).parent.resolve()
TORCH = ["2.13.0", "2.14.1"]
# Distributions and their folders, lowest layer first.
PACKAGES = {
    "openreg-runtime": "runtime",
    "openreg-eager": "eager",
    "openreg-inductor": "inductor",
    "openreg": "autoload",
}

nox.needs_version = ">=2024.3.2"
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests", "conformance"]


def install_openreg(session: nox.Session, torch: str) -> None:
    """Installs torch==`torch`, then openreg's wheels built against it, lowest layer first."""
    # expecttest: torch.testing._internal (OpInfo, device-generic tests) imports it.
    session.install(f"torch=={torch}", "numpy", "hatchling", "editables", "pytest", "expecttest")
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    for name, folder in PACKAGES.items():
        # Each built against the layers below, installed from dist/ only (no index: a same-named
        # project there must not win); torch is already installed. --no-cache-dir: pip would
        # otherwise cache a wheel built from a folder by its path and reuse it.
        session.run("python", "-m", "pip", "wheel", "--no-cache-dir", "--no-build-isolation", "--no-deps",
                    "-w", dist, ROOT / "packages" / folder)
        session.run("python", "-m", "pip", "uninstall", "--yes", name, silent=True)
        session.run("python", "-m", "pip", "install", "--no-index", "--find-links", dist, name)


def _is_path(arg: Path) -> bool:
    return not str(arg).startswith("-") and Path(str(arg).split("::")[0]).exists()


def _pytest(session: nox.Session, args: list[str], env: dict[str, str] | None = None) -> None:
    """pytest from a scratch directory against the installed wheels; no tests collected is a failure."""
    session.chdir(session.create_tmp())
    try:
        session.run("python", "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
                    "-p", "no:cacheprovider", *args, env=env or {})
    except CommandFailed as exc:
        if exc.return_code == 5:
            session.error(f"pytest collected no tests from {' '.join(args)}: a test run that tests nothing fails")
        raise


@nox.session
@nox.parametrize("torch", TORCH, ids=[f"torch-{v}" for v in TORCH])
def tests(session: nox.Session, torch: str) -> None:
    """pytest against the installed wheels; arguments after -- go to pytest. The OpInfo sweep runs in
    float32 here (the acceptance target); the `conformance` session runs every dtype."""
    install_openreg(session, torch)
    # Paths given after -- are taken relative to the checkout; without any, every packages/*/tests
    # folder is collected.
    args = [str(ROOT / a) if _is_path(ROOT / a) else a for a in session.posargs]
    if not any(_is_path(Path(a)) for a in args):
        args += sorted(str(p) for p in ROOT.glob("packages/*/tests"))
    if not any(_is_path(Path(a)) for a in args):
        session.error("no test directories found under packages/*/tests")
    _pytest(session, args, env={"OPENREG_SWEEP_DTYPES": "float32"})


@nox.session
def conformance(session: nox.Session) -> None:
    """The OpInfo sweep over every dtype with OPENREG_FALLBACK=error; writes conformance-report.{json,md}
    to $OPENREG_REPORT_DIR (default: conformance-report/ in the checkout)."""
    install_openreg(session, TORCH[0])
    report = os.environ.get("OPENREG_REPORT_DIR", str(ROOT / "conformance-report"))
    _pytest(session, [str(ROOT / "packages" / "eager" / "tests" / "conformance"), *session.posargs],
            env={"OPENREG_FALLBACK": "error", "OPENREG_REPORT_DIR": report})
    session.log(f"conformance report: {report}/conformance-report.md")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check over the whole repository."""
    session.install("ruff==0.17.6")
    session.run("ruff", "check", str(ROOT), *session.posargs)


@nox.session
def demo(session: nox.Session) -> None:
    """Runs examples/demo.py: devices, copies, streams, events and memory statistics."""
    install_openreg(session, TORCH[0])
    session.run("python", str(ROOT / "examples" / "demo.py"))


@nox.session
def bench(session: nox.Session) -> None:
    """Runs the benchmarks (openreg against the CPU); e.g. `nox -s bench -- --json out.json` writes
    out-runtime.json and out-eager.json."""
    install_openreg(session, TORCH[0])
    for suite in ("runtime", "eager"):
        args = list(session.posargs)
        if "--json" in args:
            path = Path(args[args.index("--json") + 1])
            args[args.index("--json") + 1] = str(path.with_name(f"{path.stem}-{suite}{path.suffix}"))
        session.run("python", str(ROOT / "benchmarks" / f"{suite}.py"), *args)
