"""What a run folder's kept trace says: exposed and hidden communication per device, and the
trace's diagnostics. Read by `pgle report` and by `tune --compare`'s table (a module of its own so
that neither imports the other)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pgle.analysis import diagnostics, overlap, timeline
from pgle.profiles.jaxlib import newest_run_folder
from pgle.profiles.xspace_file import TraceFile, find_xplane_files
from pgle.verdicts.pgle_applied import GPU_PLATFORMS


def trace_sections(folder: Path, platform: str | None) -> dict[str, Any]:
    """Exposed vs hidden communication and the trace diagnostics of a run folder's trace."""
    run = newest_run_folder(folder / "trace")
    # By name: the first host's steps frame the windows, whatever the directory's order.
    files = sorted(find_xplane_files(run)) if run is not None else []
    if not files:
        why = (
            "this run kept no trace (tune keeps one for the first run of each side; `pgle "
            "run --trace-window` keeps one)"
        )
        return {
            "trace_files": [],
            "communication": None,
            "communication_why": why,
            "trace_diagnostics": None,
            "trace_diagnostics_why": why,
        }
    steps_all = []
    acc = over = None
    for path in files:
        trace = TraceFile(path)
        steps = timeline.host_steps(trace)
        steps_all += steps
        acc = acc or overlap.OverlapAccumulator(steps)
        over = over or diagnostics.TraceDiagnostics(steps)
        for plane in timeline.device_planes(trace):
            acc.add(plane)
            over.add(plane)
    assert acc is not None and over is not None
    comm = acc.result()
    out: dict[str, Any] = {"trace_files": files, "trace_steps": len(steps_all)}
    if comm["device_planes"] == 0:
        why = (
            f"the trace holds no device plane: XLA:{(platform or 'cpu').upper()} runs "
            "kernels on host threads, so it has no device timeline, no async collectives "
            "and nothing for PGLE to hide"
            if (platform or "cpu") not in GPU_PLATFORMS
            else "the trace holds no /device:GPU plane (was CUPTI available to the profiler?)"
        )
        return out | {
            "communication": None,
            "communication_why": why,
            "trace_diagnostics": None,
            "trace_diagnostics_why": why,
        }
    out["communication"] = comm
    if comm["collectives"] == 0:
        out["communication_why"] = "the device planes hold no collective (a single-device program?)"
    out["trace_diagnostics"] = over.result()
    return out
