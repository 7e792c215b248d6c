"""The benchmark harness now lives in the openreg package (openreg.bench.harness), so that the
installed `openreg bench` command can run the suites; this module re-exports it for scripts here."""

from openreg.bench.harness import Case, Suite, measure, run_suite, script

__all__ = ["Case", "Suite", "measure", "run_suite", "script"]
