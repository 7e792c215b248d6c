"""Sessions for openreg: `nox` (what CI runs: lint, tests, conformance, variants), `nox -s models`, `nox -s demo`,
`nox -s bench`.

Every session that needs openreg installs an exact torch release, builds the four wheels
against it (`pip wheel --no-build-isolation`, each layer against the installed layers below it;
the build hooks keep their objects per torch release; later sessions of the same nox run on the
same release reuse those wheels) and installs them from those files only, as a user would get
them. Tests run from a scratch directory so that the source tree (whose runtime may hold no
compiled modules, or ones built for another torch) cannot shadow the installed wheels.
`variants` then reinstalls one install variant at a time from those wheels, the way a user asks for it.
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
nox.options.sessions = ["lint", "tests", "conformance", "variants"]
# Small models from third-party libraries: only on the newest torch (see MODEL_LIBRARIES), in its `tests` session.
MODELS_TESTS = ROOT / "packages" / "eager" / "tests" / "models"
# The OpInfo sweep: `conformance` runs it in every dtype on the oldest torch, `tests` in float32 on the others.
CONFORMANCE_TESTS = ROOT / "packages" / "eager" / "tests" / "conformance"
# What does not depend on the torch release, run on the oldest only: the command line and the broken-install checks
# are openreg's own Python; the extension examples build the same way against any torch (a minute per build); the
# two-rank distributed tests start about twenty processes.
OLDEST_ONLY = [ROOT / "packages" / f for f in ("autoload/tests/test_autoload_cli.py",
                                               "autoload/tests/test_autoload_broken.py",
                                               "eager/tests/test_eager_extensions.py",
                                               "eager/tests/distributed")]
# What the models tests need beside torch. torchvision's CPU wheels exist beside torch 2.14.x only (its
# wheel for 2.13 needs CUDA's libraries), and timm needs torchvision; transformers is pure Python.
MODEL_LIBRARIES = ["transformers==5.24.0", "torchvision==0.29.1", "timm==1.0.31"]


# Tests run in one process per core (pytest-xdist): much of a test's time is a thread or a child process waiting
# for another, which a second worker fills.
TEST_TOOLS = ["pytest", "pytest-xdist"]
PARALLEL = ["--numprocesses", "auto", "--maxprocesses", "4"]

# Wheels built in this nox run, per torch release: later sessions on the same release install those
# instead of building them again (nox runs every session of one invocation in this process).
_BUILT: dict[str, Path] = {}


def install_openreg(session: nox.Session, torch: str) -> Path:
    """Installs torch==`torch`, then openreg's wheels built against it, lowest layer first; returns the folder
    holding the wheels."""
    # expecttest: torch.testing._internal (OpInfo, device-generic tests) imports it.
    session.install(f"torch=={torch}", "numpy", "hatchling", "editables", *TEST_TOOLS, "expecttest")
    built = _BUILT.get(torch)
    dist = built or Path(session.create_tmp()) / "dist"
    if built is None:
        shutil.rmtree(dist, ignore_errors=True)
    else:
        session.log(f"openreg's wheels for torch {torch}: built earlier in this run, in {dist}")
    for name, folder in PACKAGES.items():
        # Each built against the layers below, installed from dist/ only (no index: a same-named
        # project there must not win); torch is already installed. --no-cache-dir: pip would
        # otherwise cache a wheel built from a folder by its path and reuse it.
        if built is None:
            session.run("python", "-m", "pip", "wheel", "--no-cache-dir", "--no-build-isolation", "--no-deps",
                        "-w", dist, ROOT / "packages" / folder)
        session.run("python", "-m", "pip", "uninstall", "--yes", name, silent=True)
        session.run("python", "-m", "pip", "install", "--no-index", "--find-links", dist, name)
    _BUILT[torch] = dist
    return dist


def _is_path(arg: Path) -> bool:
    return not str(arg).startswith("-") and Path(str(arg).split("::")[0]).exists()


def _pytest(session: nox.Session, args: list[str], env: dict[str, str] | None = None, python: str = "python") -> None:
    """pytest from a scratch directory against the installed wheels, one worker per core (PARALLEL; `-n 0` after
    -- runs the tests in this process); no tests collected is a failure. `python`: the interpreter of another
    environment than the session's."""
    tmp = Path(session.create_tmp()).resolve()
    session.chdir(tmp)
    # The run's temporary files, Inductor's kernel cache and precompiled headers among them (about 1.7 GB after
    # the compile tests), are deleted when pytest ends, so that CI's sessions fit on a smaller disk.
    scratch = tmp / "scratch"
    scratch.mkdir(exist_ok=True)
    try:
        session.run(python, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
                    "-p", "no:cacheprovider", *PARALLEL, *args, env={"TMPDIR": str(scratch), **(env or {})},
                    external=python != "python")
    except CommandFailed as exc:
        if exc.return_code == 5:
            session.error(f"pytest collected no tests from {' '.join(args)}: a test run that tests nothing fails")
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@nox.session
@nox.parametrize("torch", TORCH, ids=[f"torch-{v}" for v in TORCH])
def tests(session: nox.Session, torch: str) -> None:
    """pytest against the installed wheels; arguments after -- go to pytest. Without paths, every packages/*/tests
    folder, less what runs elsewhere: on the oldest torch the OpInfo sweep is `conformance`'s (every dtype), on the
    newest the models (MODEL_LIBRARIES installed here) and the float32 sweep run here, the release-independent
    files (OLDEST_ONLY) only on the oldest, and on the oldest what `variants` runs there (_run_elsewhere)."""
    install_openreg(session, torch)
    # Paths given after -- are taken relative to the checkout.
    args = [str(ROOT / a) if _is_path(ROOT / a) else a for a in session.posargs]
    chosen = [Path(a.split("::")[0]).resolve() for a in args if _is_path(Path(a))]
    if not chosen:
        elsewhere = _run_elsewhere(torch)
        # pytest collects a folder named on its command line even when --ignore names it too.
        folders = sorted(str(p) for p in ROOT.glob("packages/*/tests") if p not in elsewhere)
        if not folders:
            session.error("no test directories found under packages/*/tests")
        args += folders + [f"--ignore={p}" for p in elsewhere]
    if torch == TORCH[-1] and (not chosen or any(p.is_relative_to(MODELS_TESTS) for p in chosen)):
        _install_model_libraries(session, torch)
    _pytest(session, args, env={"OPENREG_SWEEP_DTYPES": "float32", "OPENREG_MODELS_REQUIRE": "1"})
    if os.environ.get("CI") and torch == TORCH[-1]:  # its torch (about 6 GB) goes once it passed: a CI disk is small
        shutil.rmtree(session.virtualenv.location)


def _run_elsewhere(torch: str) -> list[Path]:
    """What a whole `tests` run on `torch` leaves to other sessions or releases. On the oldest, `variants` runs the
    runtime's, import and command-line tests in environments holding only part of openreg (so each passes without
    the layers above it), and they are not run a second time beside every layer."""
    if torch == TORCH[0]:
        return [MODELS_TESTS, CONFORMANCE_TESTS, *_VARIANT_ONLY]
    return OLDEST_ONLY + ([] if torch == TORCH[-1] else [MODELS_TESTS])


def _install_model_libraries(session: nox.Session, torch: str) -> None:
    # torch named again so that nothing these libraries ask for moves it.
    session.install(f"torch=={torch}", *MODEL_LIBRARIES)


@nox.session
def conformance(session: nox.Session) -> None:
    """The OpInfo sweep over every dtype; writes conformance-report.{json,md}
    to $OPENREG_REPORT_DIR (default: conformance-report/ in the checkout)."""
    install_openreg(session, TORCH[0])
    report = os.environ.get("OPENREG_REPORT_DIR", str(ROOT / "conformance-report"))
    _pytest(session, [str(ROOT / "packages" / "eager" / "tests" / "conformance"), *session.posargs],
            env={"OPENREG_REPORT_DIR": report})
    session.log(f"conformance report: {report}/conformance-report.md")


@nox.session
def models(session: nox.Session) -> None:
    """Only the models tests (whole runs do them in tests(torch-2.14.1)): small models from transformers (GPT-2,
    BERT, T5, Llama), torchvision (ResNet-18) and timm, built from configs with random weights, trained for a few
    steps on openreg and on the CPU; losses, outputs, gradients, buffers, tied weights and generate() compared.
    Arguments after -- go to pytest."""
    torch = TORCH[-1]
    install_openreg(session, torch)
    _install_model_libraries(session, torch)
    # Every library is installed here: a test that would skip for a missing one fails instead.
    _pytest(session, [str(MODELS_TESTS), *session.posargs], env={"OPENREG_MODELS_REQUIRE": "1"})


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check over the whole repository's Python; clang-format (.clang-format) over its C++, which fails on any
    file it would change (`clang-format -i <file>` fixes one)."""
    session.install("ruff==0.17.6", "clang-format==23.1.5")
    session.run("ruff", "check", str(ROOT), *session.posargs)
    cpp = sorted(str(p) for p in (ROOT / "packages").rglob("*")
                 if p.suffix in {".cpp", ".h"} and "build" not in p.relative_to(ROOT).parts)
    if not cpp:
        session.error("no C++ files found under packages/")
    session.run("clang-format", "--dry-run", "--Werror", *cpp, silent=True)


@nox.session
def demo(session: nox.Session) -> None:
    """`openreg doctor`, the runtime tour in examples/demo.py, then `openreg demo` (training on openreg vs the CPU)."""
    install_openreg(session, TORCH[0])
    session.run("openreg", "doctor")
    session.run("python", str(ROOT / "examples" / "demo.py"))
    session.run("openreg", "demo", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """`openreg bench`: the benchmark suites, openreg against the CPU; e.g. `nox -s bench -- --json out.json
    --plot out.png` (the chart needs matplotlib, which this session installs)."""
    install_openreg(session, TORCH[0])
    session.install("matplotlib")
    session.run("openreg", "bench", *session.posargs)


# What each install variant asks pip for, and the tests that check it (paths under packages/).
VARIANTS = {
    "runtime": ("openreg-runtime", ["autoload/tests/test_autoload_variants.py", "runtime/tests"]),
    "eager": ("openreg", ["autoload/tests/test_autoload_variants.py", "autoload/tests/test_autoload_compile.py",
                          "autoload/tests/test_autoload_import.py", "autoload/tests/test_autoload_cli.py"]),
    "compile": ("openreg[compile,plot]",
                ["autoload/tests/test_autoload_variants.py", "autoload/tests/test_autoload_cli.py"]),
}


# What `variants` runs on the oldest torch for `tests` (the check of the variant itself runs in both).
_VARIANT_ONLY = sorted({ROOT / "packages" / t for _, tests in VARIANTS.values() for t in tests
                        if not t.endswith("test_autoload_variants.py")})


@nox.session
def variants(session: nox.Session) -> None:
    """Each install variant in turn in an environment apart from the session's, installed from the wheels as a
    user installs it (`pip install --no-index --find-links dist "openreg[compile]"`), then its tests; arguments
    after -- go to pytest. The wheels are built once for all of them."""
    dist = install_openreg(session, TORCH[0]).resolve()
    tmp = Path(session.create_tmp()).resolve()  # resolved now: _pytest changes the working directory
    venv = tmp / "venv-variants"
    python = _variant_env(session, venv)
    for variant, (requirement, tests) in VARIANTS.items():
        session.log(f"variant {variant}: pip install {requirement}")
        _install_variant(session, python, requirement, dist)
        _pytest(session, [*(str(ROOT / "packages" / t) for t in tests), *session.posargs],
                env={"TEST_OPENREG_VARIANT": variant}, python=python)
    # It holds a torch of its own (1 GB), so that CI fits on a smaller disk. A failed variant's environment stays
    # for inspection until the next run.
    shutil.rmtree(venv)


def _variant_env(session: nox.Session, venv: Path) -> str:
    """The interpreter of a new virtualenv `venv` holding torch, numpy and pytest, and none of openreg: one torch
    install serves every variant (each takes about a minute)."""
    shutil.rmtree(venv, ignore_errors=True)
    session.run("python", "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    session.run(python, "-m", "pip", "install", "--quiet", f"torch=={TORCH[0]}", "numpy", *TEST_TOOLS, external=True)
    return python


def _install_variant(session: nox.Session, python: str, requirement: str, dist: Path) -> None:
    """Makes openreg in `python`'s environment exactly what `pip install <requirement>` brings from `dist`: the
    previous variant's distributions go first, so a layer it had cannot pass for one this variant lacks."""
    pip = [python, "-m", "pip"]
    session.run(*pip, "uninstall", "--yes", "--quiet", *PACKAGES, external=True, silent=True)
    if "plot" in requirement:
        session.run(*pip, "install", "--quiet", "matplotlib", external=True)  # openreg's wheels: dist/ only
    session.run(*pip, "install", "--no-index", "--find-links", str(dist), requirement, external=True)
