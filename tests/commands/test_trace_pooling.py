"""collect pools the traces of a command's several Python processes into one folder (issue 23):
two processes on one host write trace files of the same name (`<host>.xplane.pb`), and both
must be kept (a regression mutant, K09, once survived: the end-to-end test's processes happened
to write different names)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pgle.commands.collect import trace_run_folder
from pgle.evidence.event_kinds import TraceStop


def _trace(root: Path, stamp: str, body: bytes) -> Path:
    run = root / "plugins" / "profile" / stamp
    run.mkdir(parents=True)
    (run / "host.xplane.pb").write_bytes(body)
    return root


def test_two_processes_traces_with_one_name_are_both_pooled(tmp_path):
    first = _trace(tmp_path / "run" / "trace", "2026_01_01_00_00_00", b"rank0")
    other = tmp_path / "run" / "procs" / "1"
    _trace(other / "trace", "2026_01_01_00_00_01", b"rank1")
    # The run folder and the events collect reads: the first process's trace folder, and the
    # folder of each other process (the harness's `processes` rows).
    ex = SimpleNamespace(
        run=SimpleNamespace(path=tmp_path / "run", trace=first),
        events=SimpleNamespace(processes=[{"dir": None}, {"dir": str(other)}]),
    )
    pooled = trace_run_folder(ex, TraceStop(t=0.0, purpose="window"))
    assert pooled is not None and pooled.parent.parent.parent.name == "trace-pooled"
    got = sorted(p.read_bytes() for p in pooled.glob("*.xplane.pb"))
    assert got == [b"rank0", b"rank1"]


def test_one_process_keeps_its_own_folder(tmp_path):
    first = _trace(tmp_path / "run" / "trace", "2026_01_01_00_00_00", b"rank0")
    ex = SimpleNamespace(
        run=SimpleNamespace(path=tmp_path / "run", trace=first),
        events=SimpleNamespace(processes=[{"dir": None}]),
    )
    assert trace_run_folder(ex, TraceStop(t=0.0, purpose="window")) == (
        first / "plugins" / "profile" / "2026_01_01_00_00_00")
