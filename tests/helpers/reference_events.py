"""`read_events` as it was before issue 25 (commit bec513a), verbatim: every record kept, one
`json.loads` per line. The reference the streamed reader must equal (tests only)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pgle.evidence import schema


@dataclasses.dataclass
class Step:
    index: int
    name: str
    step_num: int | None
    t_enter: float
    t_exit: float | None = None


@dataclasses.dataclass
class RunEvents:
    records: list[dict]
    steps: list[Step]
    backend: dict | None
    trace: dict | None  # the trace_stop record of the kept trace
    trace_errors: list[str]
    compiles: list[dict]
    exit: dict | None
    modules: list[dict] = dataclasses.field(default_factory=list)  # schema.MODULE_COMPILED records
    xla_flags_seen: dict | None = None  # schema.XLA_FLAGS_SEEN: XLA_FLAGS at the first compile
    script_traces: list[dict] = dataclasses.field(default_factory=list)  # schema.SCRIPT_TRACE

    @property
    def platform(self) -> str | None:
        return self.backend.get("platform") if self.backend else None

    @property
    def jax_imported(self) -> bool | None:
        """Did the workload import jax? None when the harness left no events at all."""
        if any(r.get("kind") == schema.JAX_IMPORTED for r in self.records):
            return True
        return False if self.records else None


def read_events(path: Path | str) -> RunEvents:
    records = []
    path = Path(path)
    if path.exists():
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a line cut short by a crash
    steps: dict[int, Step] = {}
    backend = trace = exit_ = None
    errors, compiles, modules, script_traces = [], [], [], []
    flags_seen = None
    for r in records:
        kind = r.get("kind")
        if kind == schema.STEP_ENTER:
            steps[r["index"]] = Step(r["index"], r.get("name", ""), r.get("step_num"), r["t"])
        elif kind == schema.STEP_EXIT and r.get("index") in steps:
            steps[r["index"]].t_exit = r["t"]
        elif kind == schema.BACKEND and backend is None:
            backend = r
        elif kind == schema.TRACE_STOP:
            trace = r
        elif kind == schema.TRACE_ERROR:
            errors.append(r.get("error", ""))
        elif kind == schema.COMPILE:
            compiles.append(r)
        elif kind == schema.MODULE_COMPILED:
            modules.append(r)
        elif kind == schema.EXIT:
            exit_ = r
        elif kind == schema.XLA_FLAGS_SEEN and flags_seen is None:
            flags_seen = r
        elif kind == schema.SCRIPT_TRACE:
            script_traces.append(r)
    return RunEvents(records, [steps[i] for i in sorted(steps)], backend, trace, errors,
                     compiles, exit_, modules, flags_seen, script_traces)
