"""Reading the harness's events file (JSON lines written by pgle/launch/harness.py; the kinds
and their fields are in pgle/launch/schema.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pgle.launch import schema


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
    xla_compiles: list[dict] = dataclasses.field(default_factory=list)  # schema.XLA_COMPILE

    @property
    def compile_platforms(self) -> tuple[str, ...] | None:
        """Platforms XLA compiled for, as the harness saw every compile; None when it could
        not watch them (no harness, or its compile observer was not installed)."""
        installed = [r for r in self.records if r.get("kind") == schema.OBSERVE_MODULES]
        if not installed or not installed[-1].get("installed"):
            return None
        return tuple(str(r.get("platform")) for r in self.xla_compiles)

    @property
    def compile_threads(self) -> tuple[str, ...]:
        """Native ids of the threads that called XLA's compile, and the process id (the
        main thread's id on Linux)."""
        ids = [str(r.get("thread")) for r in self.xla_compiles]
        ids += [str(r.get("pid")) for r in self.xla_compiles if r.get("pid")]
        return tuple(dict.fromkeys(ids))

    @property
    def workload_modules(self) -> set[str] | None:
        """The modules the workload compiled (the harness's per-module records); None when
        the records may be incomplete."""
        if any(r.get("kind") == schema.MODULE_ERROR for r in self.records) \
                or self.compile_platforms is None:
            return None
        return {str(r["module"]) for r in self.modules if r.get("module")} or None

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
    errors, compiles, modules, script_traces, xla_compiles = [], [], [], [], []
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
        elif kind == schema.XLA_COMPILE:
            xla_compiles.append(r)
    return RunEvents(records, [steps[i] for i in sorted(steps)], backend, trace, errors,
                     compiles, exit_, modules, flags_seen, script_traces, xla_compiles)
