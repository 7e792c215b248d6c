"""Report for the OpInfo conformance sweep (test_opinfo_sweep.py).

At the end of the session, if any sweep test ran, writes into $OPENREG_REPORT_DIR (default:
pytest's temporary directory for the session):

- conformance-report.json: one record per (op, dtype) with the outcome (passed / failed / xfailed /
  xpassed / skipped), the expected-failure reason or the error and whether gradients were checked;
- conformance-report.md: counts per dtype, the share of op_db entries passing in float32
  (gradients included), the expected failures with their reasons and the failures.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

SWEEP_MODULE = "test_opinfo_sweep.py"
_records: dict[str, dict] = {}
_started = time.monotonic()


def _is_sweep(nodeid: str) -> bool:
    return SWEEP_MODULE in nodeid and "::test_opinfo[" in nodeid


def _split(nodeid: str) -> tuple[str, str]:
    param = nodeid.split("::test_opinfo[", 1)[1][:-1]
    op, _, dtype = param.rpartition("-")
    return op, dtype


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not _is_sweep(report.nodeid):
        return
    op, dtype = _split(report.nodeid)
    rec = _records.setdefault(report.nodeid, {"op": op, "dtype": dtype, "outcome": None, "duration_s": 0.0})
    rec["duration_s"] = round(rec["duration_s"] + report.duration, 3)
    props = dict(report.user_properties)
    for key in ("gradients", "samples", "child_process"):
        if key in props:
            rec[key] = props[key]
    if report.when == "call" or report.outcome != "passed":
        if hasattr(report, "wasxfail"):
            rec["outcome"] = "xfailed" if report.outcome == "skipped" else "xpassed"
            rec["reason"] = report.wasxfail
        elif rec["outcome"] in (None, "passed"):
            rec["outcome"] = report.outcome
        if (report.failed or hasattr(report, "wasxfail")) and report.longrepr is not None and "error" not in rec:
            rec["error"] = _summary_line(report)
        if report.skipped and not hasattr(report, "wasxfail"):
            rec["reason"] = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)


def _summary_line(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    return text.strip()[:2000]


def _report_dir(session: pytest.Session) -> Path:
    raw = os.environ.get("OPENREG_REPORT_DIR")
    if raw:
        return Path(raw)
    factory = getattr(session.config, "_tmp_path_factory", None)
    return factory.getbasetemp() if factory is not None else Path.cwd()


def _markdown(records: list[dict], elapsed: float) -> str:
    by_dtype: dict[str, Counter] = defaultdict(Counter)
    seconds: Counter = Counter()
    for r in records:
        by_dtype[r["dtype"]][r["outcome"]] += 1
        seconds[r["dtype"]] += r["duration_s"]
    lines = ["# OpInfo conformance sweep on openreg", ""]
    lines += [
        f"pytest session time {elapsed:.0f} s; the seconds column is the sweep's own time. "
        "Every sample ran on openreg and on the CPU; results compared "
        "with torch.testing.assert_close, input gradients for differentiable floating-point ops, "
        "plus a non-contiguous copy of the first sample.",
        "",
    ]
    lines += [
        "| dtype | entries | passed | failed | xfailed | xpassed | skipped | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for dtype, c in by_dtype.items():
        total = sum(c.values())
        lines.append(
            f"| {dtype} | {total} | {c['passed']} | {c['failed']} | {c['xfailed']} | {c['xpassed']} | "
            f"{c['skipped']} | {seconds[dtype]:.0f} |"
        )
    f32 = [r for r in records if r["dtype"] == "float32"]
    if f32:
        from torch.testing._internal.common_methods_invocations import op_db

        passed = sum(r["outcome"] == "passed" for r in f32)
        lines += [
            "",
            f"float32: {passed} of the {len(f32)} op_db entries that support float32 on the CPU pass, "
            f"gradients included ({100 * passed / len(f32):.1f} %); op_db has {len(op_db)} entries in all.",
            "",
        ]
    by_reason: dict[str, list[str]] = defaultdict(list)
    for r in records:
        if r["outcome"] in ("xfailed", "xpassed"):
            by_reason[r.get("reason", "")].append(
                f"{r['op']}-{r['dtype']}" + (" (XPASS)" if r["outcome"] == "xpassed" else "")
            )
    lines += ["", "## Expected failures, by reason", ""]
    lines += [f"- {reason}: {', '.join(f'`{c}`' for c in cases)}" for reason, cases in by_reason.items()] or ["none"]
    failed = [r for r in records if r["outcome"] == "failed"]
    lines += ["", "## Failures", ""]
    lines += [
        f"- `{r['op']}` {r['dtype']}: {r.get('error', '').splitlines()[0][:300] if r.get('error') else ''}"
        for r in failed
    ] or ["none"]
    return "\n".join(lines) + "\n"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Under pytest-xdist every worker holds a share of the records and the controller all of them.
    if not _records or hasattr(session.config, "workerinput"):
        return
    records = sorted(_records.values(), key=lambda r: (r["dtype"], r["op"]))
    elapsed = time.monotonic() - _started
    out = _report_dir(session)
    out.mkdir(parents=True, exist_ok=True)
    summary = Counter(r["outcome"] for r in records)
    payload = {
        "elapsed_s": round(elapsed, 1),
        "summary": dict(summary),
        "results": records,
    }
    (out / "conformance-report.json").write_text(json.dumps(payload, indent=1) + "\n")
    (out / "conformance-report.md").write_text(_markdown(records, elapsed))
    session.config._openreg_report_dir = out


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    out = getattr(config, "_openreg_report_dir", None)
    if out is not None:
        terminalreporter.write_line(f"openreg conformance report: {out / 'conformance-report.md'}")
