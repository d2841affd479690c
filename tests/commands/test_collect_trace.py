"""Traces that stop in seconds (issue 36): what `pgle collect` asks the JAX profiler for, the
trace's size and export time in the report, the check that the options took, the size bound.
Real collects on CPU of a workload whose steps make many Python calls (what the Python tracer
records when it is on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.pgle_testing import WORKLOADS, report_of, run_pgle

from pgle.commands.extract import option_warnings
from pgle.commands.run_trace import trace_sections
from pgle.launch.trace_options import PGLE_OPTIONS
from pgle.profiles.xspace_file import find_xplane_files
from pgle.profiles.trace_contents import read_contents

HEAVY = WORKLOADS / "py_heavy_steps.py"


def _collect(project: Path, name: str, *options: str) -> dict:
    proc = run_pgle("collect", "--run-dir", name, "--allow-empty", "-o", f"{name}.pb", "--json",
                    *options, "--", "python", str(HEAVY), "10", cwd=project, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    return report_of(proc)


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    """The same workload collected with pgle's options and with jax.profiler's defaults."""
    project = tmp_path_factory.mktemp("trace")
    return {detail: (project / detail, _collect(project, detail, "--trace-detail", detail))
            for detail in ("pgle", "full")}


def test_collect_asks_for_what_pgle_reads_and_reports_size_and_export(collected) -> None:
    run, report = collected["pgle"]
    trace = report["window"]["trace"]
    assert trace["detail"] == "pgle" and trace["options"] == PGLE_OPTIONS
    assert trace["options_ignored"] == []
    assert trace["contents"]["python_event_kinds"] == 0  # the option took
    assert trace["contents"]["host_event_kinds"] > 0
    files = find_xplane_files(next((run / "trace" / "plugins" / "profile").iterdir()))
    assert trace["bytes"] == sum(Path(f).stat().st_size for f in files) > 0
    assert isinstance(trace["stop_trace_seconds"], float)
    assert trace["probe"]["step"] == 1 and trace["probe"]["steps"] == 5  # 1.5 GiB: all fit
    assert not [w for w in report["warnings"] if "profiler" in w]
    # What `pgle report` reads from the host plane is still there: the window's 5 steps.
    assert trace_sections(run, "cpu")["trace_steps"] == 5


def test_the_defaults_record_python_calls_and_the_trace_is_bigger(collected) -> None:
    _run, full = collected["full"]
    _run, pgle = collected["pgle"]
    trace = full["window"]["trace"]
    assert trace["detail"] == "full" and trace["options"] == {}
    assert trace["contents"]["python_event_kinds"] > 0
    assert trace["bytes"] > 2 * pgle["window"]["trace"]["bytes"]


def test_a_python_tracer_that_did_not_turn_off_is_said(collected, tmp_path: Path) -> None:
    """The check on a real trace: the defaults' trace read as if pgle's options had been
    asked (what a jax that ignores python_tracer_level would write) gives the warning; pgle's
    own trace gives none; an empty xplane.pb (protobuf's 2 GiB limit) is said."""
    full_run, _ = collected["full"]
    pgle_run, _ = collected["pgle"]
    full = read_contents(find_xplane_files(next((full_run / "trace/plugins/profile").iterdir())))
    (warning,) = option_warnings(dict(PGLE_OPTIONS), full, "t")
    assert "python_tracer_level=0" in warning and "did not take" in warning
    ours = read_contents(find_xplane_files(next((pgle_run / "trace/plugins/profile").iterdir())))
    assert option_warnings(dict(PGLE_OPTIONS), ours, "t") == []
    (tmp_path / "host.xplane.pb").write_bytes(b"")
    empty = read_contents([str(tmp_path / "host.xplane.pb")])
    (lost,) = option_warnings(dict(PGLE_OPTIONS), empty, tmp_path)
    assert "1 trace file" in lost and "2 GiB" in lost


def test_the_size_bound_cuts_the_window(tmp_path: Path) -> None:
    report = _collect(tmp_path, "cut", "--trace-max-bytes", "1")
    assert report["window"]["steps"] == 1 and report["window"]["first_step"] == 2
    probe = report["window"]["trace"]["probe"]
    assert probe["step"] == 1 and probe["bytes"] > 0 and probe["steps"] == 1
    assert any("holds 1 step (steps 2..2), not 5" in w for w in report["warnings"])


def test_a_crash_in_the_size_probe_says_so_and_how_to_skip_it(tmp_path: Path) -> None:
    """The process dies in the probe's stop_trace (jax 0.10.2's start_trace and stop_trace each
    call clear_metadata; the second call, the probe's stop, is made to crash as a profiler
    teardown can): the reason names the probe and --trace-max-bytes 0, not a window."""
    script = tmp_path / "crash.py"
    script.write_text(
        "import os, signal, jax, jax.numpy as jnp\n"
        "import jax._src.profiler as _p\n"
        "_calls = []\n"
        "def _crash_in_stop():\n"
        "    _calls.append(1)\n"
        "    if len(_calls) == 2:\n"
        "        os.kill(os.getpid(), signal.SIGSEGV)\n"
        "_p.clear_metadata = _crash_in_stop\n"
        "f = jax.jit(lambda x: x * 2)\n"
        "x = jnp.ones(4)\n"
        "for i in range(8):\n"
        "    with jax.profiler.StepTraceAnnotation('train', step_num=i):\n"
        "        x = f(x)\n"
        "x.block_until_ready()\n")
    proc = run_pgle("collect", "-o", "out.pb", "--json", str(script), cwd=tmp_path)
    assert proc.returncode == 139, proc.stderr.decode()
    report = report_of(proc)
    (reason,) = [r for r in report["reasons"] if "--trace-max-bytes 0" in r]
    assert "traced step 1 alone" in reason and "nothing was profiled" in reason


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--trace-max-bytes", "lots", "--trace-max-bytes 'lots' is not a size."),
    ("--trace-detail", "everything", "'everything' is not one of 'pgle', 'full'"),
])
def test_bad_trace_options_exit_2_in_one_line(tmp_path: Path, option: str, value: str,
                                               said: str) -> None:
    proc = run_pgle("collect", option, value, "--", "python", str(HEAVY), "1", cwd=tmp_path,
                    timeout=120)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert said in err and "Traceback" not in err
    assert not (tmp_path / ".pgle").exists()  # nothing ran
