"""The `openreg` command: doctor, demo and bench, run as a user runs them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import torch
from autoload_helpers import ROOT, VERSION, installed, run_openreg

import openreg_eager
import openreg_runtime
from openreg_runtime.testing import clean_env, run_python


def test_console_script_and_module_are_the_same_command():
    scripts = [e for e in metadata.entry_points(group="console_scripts") if e.name == "openreg"]
    assert [e.value for e in scripts] == ["openreg.cli:main"]
    out = run_openreg("--help")
    assert out.returncode == 0
    for command in ("doctor", "demo", "bench"):
        assert command in out.stdout
    assert run_openreg("--version").stdout.strip() == f"openreg {VERSION}"
    assert run_openreg("frobnicate").returncode == 2


def test_doctor_reports_a_healthy_install():
    out = run_openreg("doctor")
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert re.search(rf"^torch\s+{re.escape(torch.__version__)} \(", text, re.MULTILINE)
    for layer, module in (("runtime", openreg_runtime), ("eager", openreg_eager)):
        row = rf"^  {layer}\s+openreg-{layer}\s+0\.1\.0\s+built for torch {module.BUILT_FOR_TORCH}\s+loaded$"
        assert re.search(row, text, re.MULTILINE), text
    assert re.search(r"^  compile\s+openreg-inductor\s+", text, re.MULTILINE)
    assert "autoload        active (torch.backends entry point openreg = openreg:_autoload)" in text
    memory = torch.openreg.get_device_properties(0).total_memory / 2**30
    assert f"devices         {torch.openreg.device_count()} x openreg" in text and f"{memory:g} GiB each" in text
    assert "strict off (OPENREG_STRICT), launch blocking off (OPENREG_LAUNCH_BLOCKING), sync debug" in text
    assert text.rstrip().endswith("No problems found.")


def test_doctor_shows_the_modes_and_settings_in_force():
    env = {"OPENREG_STRICT": "1", "OPENREG_LAUNCH_BLOCKING": "1",
           "OPENREG_DEVICE_COUNT": "3", "OPENREG_DEVICE_MEMORY": "512MiB", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
           "OPENREG_SANITIZE": "streams:warn"}
    out = run_openreg("doctor", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "strict on (OPENREG_STRICT), launch blocking on (OPENREG_LAUNCH_BLOCKING), sync debug" in out.stdout
    assert "3 x openreg" in out.stdout and "0.5 GiB each" in out.stdout
    assert "stream sanitizer warn (OPENREG_SANITIZE, torch.openreg.set_stream_sanitizer)" in out.stdout
    assert "autoload        off (TORCH_DEVICE_BACKEND_AUTOLOAD=0): `import openreg` enables the device" in out.stdout


def test_doctor_run_in_a_program_shows_its_debugging_switches():
    out = run_python("""
        import torch
        from openreg.doctor import doctor
        torch.openreg.set_sync_debug_mode("warn")
        torch.openreg.memory._record_memory_history()
        torch.openreg.set_stream_sanitizer("error")
        doctor()
    """)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "sync debug warn (torch.openreg.set_sync_debug_mode)" in out.stdout, out.stdout
    assert "memory history on (torch.openreg.memory._record_memory_history)" in out.stdout, out.stdout
    assert "stream sanitizer error (OPENREG_SANITIZE" in out.stdout, out.stdout


def test_doctor_fails_on_a_bad_setting_naming_the_variable():
    out = run_openreg("doctor", env={"OPENREG_DEVICE_COUNT": "lots"})
    assert out.returncode == 1
    assert "the openreg device cannot start:" in out.stdout and "OPENREG_DEVICE_COUNT" in out.stdout


def test_doctor_fails_when_a_layer_the_user_asked_for_is_missing():
    out = run_openreg("doctor", "--require", "compile")
    if installed("openreg_inductor"):
        assert out.returncode == 0, out.stdout
    else:
        assert out.returncode == 1
        fix = 'openreg-inductor (the compile layer) is not installed. Fix: pip install "openreg[compile]"'
        assert fix in out.stdout


def test_demo_trains_on_openreg_and_matches_the_cpu():
    out = run_openreg("demo", "--epochs", "3")
    assert out.returncode == 0, out.stdout + out.stderr
    losses = [float(m) for m in re.findall(r"^  epoch \d/3  loss (\d+\.\d+)", out.stdout, re.MULTILINE)]
    compiled = "compiled (torch.compile): skipped." not in out.stdout
    assert len(losses) == (6 if compiled else 3), out.stdout  # eager, then compiled
    for run in (losses[:3], losses[3:]) if compiled else (losses,):
        assert run[0] > run[1] > run[2], out.stdout
    assert re.search(r"time: openreg [\d.]+ s, cpu [\d.]+ s \([\d.]+x the CPU's time\)", out.stdout)
    assert "same results as the CPU" in out.stdout
    if "compiled (torch.compile): skipped." in out.stdout:
        assert 'pip install "openreg[compile]"' in out.stdout or "openreg-inductor" in out.stdout
    assert out.stdout.rstrip().endswith("Done.")


def _check_figures(results: list[dict], count: int) -> None:
    assert len(results) == count
    for row in results:
        assert row["openreg_s"] > 0 and row["cpu_s"] > 0
        ratios = sorted(dev / cpu for dev, cpu in row["rounds"])
        assert len(ratios) in (1, 5)  # alternating rounds; one for compilations
        assert row["ratio"] == pytest.approx(ratios[len(ratios) // 2])


def test_bench_prints_ratios_and_writes_json_and_a_chart(tmp_path: Path):
    if not installed("matplotlib"):
        pytest.skip('needs matplotlib (pip install "openreg[plot]")')
    figures, chart = tmp_path / "bench.json", tmp_path / "bench.png"
    # The compile suite (in the default with openreg[compile]) compiles models: benchmarks/compile.py runs it.
    out = run_openreg("bench", "--suite", "runtime", "--suite", "eager", "--min-run-time", "0.01",
                      "--json", str(figures), "--plot", str(chart))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "openreg runtime vs CPU" in out.stdout and "openreg eager vs CPU" in out.stdout
    assert re.search(r"^copy host->openreg 64 MiB\s+[\d.]+us\s+[\d.]+us\s+[\d.]+x", out.stdout, re.MULTILINE)
    data = json.loads(figures.read_text())
    assert data["openreg"] == VERSION and list(data["suites"]) == ["runtime", "eager"]
    _check_figures(data["suites"]["runtime"]["results"], 4)
    _check_figures(data["suites"]["eager"]["results"], 7)
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_plot_without_matplotlib_says_how_to_get_it(tmp_path: Path):
    out = run_python(f"""
        import sys
        sys.modules["matplotlib"] = None  # as if it were not installed
        from openreg.cli import main
        sys.exit(main(["bench", "--suite", "runtime", "--plot", {str(tmp_path / "x.png")!r}]))
    """)
    assert out.returncode == 1
    fix = 'openreg bench --plot needs matplotlib, which is not installed. Fix: pip install "openreg[plot]"'
    assert fix in out.stderr
    assert "openreg runtime vs CPU" not in out.stdout  # it says so before timing anything


def test_benchmark_scripts_run_the_same_suites(tmp_path: Path):
    figures = tmp_path / "runtime.json"
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "runtime.py"), "--min-run-time", "0.01",
                          "--json", str(figures)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("openreg runtime vs CPU\n")
    data = json.loads(figures.read_text())
    assert data["openreg-runtime"] == VERSION and data["threads"] >= 1
    _check_figures(data["results"], 4)


# Bad input is refused before any work (so a check that is missing shows as a hang or a long run: short timeouts).
QUICK = 60


@pytest.mark.parametrize("args, error", [
    (["demo", "--device", "bogus"], "argument --device: 'bogus' is not an openreg device: use openreg or openreg:N"),
    (["demo", "--device", "cpu"], "argument --device: 'cpu' is not an openreg device"),
    (["demo", "--epochs", "0"], "argument --epochs: '0' is not a whole number of epochs, 1 or more"),
    (["bench", "--min-run-time", "nan"], "argument --min-run-time: 'nan' is not a finite number of seconds above 0"),
    (["bench", "--min-run-time", "-1"], "argument --min-run-time: '-1' is not a finite number of seconds above 0"),
    (["bench", "--min-run-time", "inf"], "argument --min-run-time: 'inf' is not"),
    (["bench", "--json", "/nonexistent/dir/x.json"],
     "argument --json: cannot write /nonexistent/dir/x.json: there is no folder /nonexistent/dir: create it first"),
    (["bench", "--plot", "."], "argument --plot: cannot write .: it is a folder: name a file in it"),
    (["bench", "--json", "out", "--plot", "./out"], "bench --json and --plot both name out: the chart would overwrite"),
])
def test_a_bad_argument_is_a_usage_error_naming_it_before_any_work(args, error):
    out = run_openreg(*args, timeout=QUICK)
    assert out.returncode == 2, out.stdout + out.stderr
    assert error in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""


def test_benchmark_scripts_check_their_arguments_too():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "runtime.py"), "--min-run-time", "nan"],
                         capture_output=True, text=True, timeout=QUICK)
    assert out.returncode == 2 and "argument --min-run-time: 'nan' is not" in out.stderr, out.stderr


def test_demo_on_a_device_index_that_does_not_exist_says_how_many_there_are():
    out = run_openreg("demo", "--device", "openreg:7", timeout=QUICK)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert ("openreg demo: --device openreg:7: openreg device index 7 is out of range: valid indices are 0 to 1 "
            "(set OPENREG_DEVICE_COUNT for more devices)") in out.stderr
    assert out.stdout == ""


@pytest.mark.parametrize("command", [["demo"], ["bench", "--suite", "runtime"]])
@pytest.mark.parametrize("variable, value, error", [
    ("OPENREG_DEVICE_COUNT", "lots", "the openreg device cannot start: OPENREG_DEVICE_COUNT='lots'"),
    ("OPENREG_SANITIZE", "bogus", "the openreg device cannot start: OPENREG_SANITIZE='bogus' is not a "
                                  "sanitizer: use 'streams'"),
])
def test_demo_and_bench_refuse_a_bad_setting_before_any_work(command, variable, value, error):
    out = run_openreg(*command, env={variable: value}, timeout=QUICK)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert f"openreg {command[0]}: {error}" in out.stderr
    assert out.stdout == ""


def test_doctor_lists_a_bad_setting_among_its_problems():
    out = run_openreg("doctor", env={"OPENREG_SANITIZE": "bogus"}, timeout=QUICK)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert re.search(r"^  - the openreg device cannot start: OPENREG_SANITIZE='bogus' is not a sanitizer: use "
                     r"'streams' .*, or unset it$", out.stdout, re.MULTILINE), out.stdout


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_output_into_a_closed_pipe_exits_1_without_a_traceback(unbuffered):
    read, write = os.pipe()
    os.close(read)  # as `openreg doctor | head -n 1` once head has exited
    try:
        out = subprocess.run([sys.executable, "-m", "openreg", "doctor"], stdout=write, stderr=subprocess.PIPE,
                             env=clean_env(PYTHONUNBUFFERED=unbuffered), text=True, timeout=QUICK)
    finally:
        os.close(write)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr and "BrokenPipeError" not in out.stderr, out.stderr
