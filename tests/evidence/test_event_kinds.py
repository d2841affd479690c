"""The harness's events as typed records (pgle.evidence.event_kinds): every line a real run
writes parses into its kind's dataclass; a run folder from another user may hold anything,
and a line that is not an event the harness writes is rejected without a crash; a kind this
pgle does not know is kept as it was."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.pgle_testing import TESTS, WORKLOADS, pgle_env, report_of, run_pgle

from pgle import launch
from pgle.evidence import event_kinds, schema
from pgle.evidence.event_kinds import (
    Backend,
    Event,
    ScriptTrace,
    TraceStop,
    UnknownEvent,
    parse,
)
from pgle.evidence.events import read_events

WORKLOAD = """
import warnings
import jax, jax.numpy as jnp

@jax.jit
def step(x):
    return jnp.tanh(x @ x.T).sum()

x = jnp.ones((16, 16))
for i in range(8):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        step(x + i).block_until_ready()
warnings.warn("a warning of the workload's own")
"""

OWN_TRACE = """
import sys
import jax, jax.numpy as jnp
f = jax.jit(lambda a: a * 2)
f(jnp.ones(4)).block_until_ready()
jax.profiler.start_trace(sys.argv[1])
for _ in range(3):
    f(jnp.ones(4)).block_until_ready()
jax.profiler.stop_trace()
"""


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def parsed(records: list[dict[str, Any]]) -> list[Event]:
    out = []
    for r in records:
        event = parse(r)
        assert event is not None, r  # the harness wrote it: it is an event
        assert not isinstance(event, UnknownEvent), r  # ... of a kind this pgle knows
        assert event.kind == r["kind"] and event.to_dict() == r
        for name, value in r.items():
            if name not in ("kind", "t") and name in {f.name for f in dataclasses.fields(event)}:
                assert getattr(event, name) == value, (r["kind"], name)
        out.append(event)
    return out


# The harness's writers of events (`write(schema.KIND, field=...)`), read as source: every call,
# whatever path of the workload runs it.
WRITERS = ("harness.py", "jax_internals.py", "handoff.py")
# A `**spread` whose keys the source does not hold: jax.monitoring's keyword arguments, as
# strings (JaxEvent keeps them in `raw`).
OPEN_KINDS = {schema.JAX_EVENT}


def _returned_keys(tree: ast.Module, function: str) -> set[str]:
    """The keys of the dict literals `function` (a module function) returns."""
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    return {k.value for r in ast.walk(node) if isinstance(r, ast.Return)
            and isinstance(r.value, ast.Dict) for k in r.value.keys
            if isinstance(k, ast.Constant)}


def _written_fields() -> dict[str, set[str]]:
    """kind -> the fields the harness's write calls give it (`t` is Events.write's own)."""
    out: dict[str, set[str]] = {}
    for name in WRITERS:
        tree = ast.parse((Path(launch.__file__).parent / name).read_text())
        calls = {}  # a local name -> the module function whose result it holds
        aliases = {n.targets[0].id: n.value.attr for n in tree.body  # EVENT_MODULE = schema.X
                   if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)
                   and isinstance(n.value, ast.Attribute) and isinstance(n.value.value, ast.Name)
                   and n.value.value.id == "schema"}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name)):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        calls[target.id] = node.value.func.id
            if not isinstance(node, ast.Call) or not node.args:
                continue
            first = node.args[0]
            if (isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name)
                    and first.value.id == "schema"):
                kind = getattr(schema, first.attr)
            elif isinstance(first, ast.Name) and first.id in aliases:
                kind = getattr(schema, aliases[first.id])
            else:
                continue
            if not isinstance(kind, str) or kind not in event_kinds.KINDS:
                continue  # another use of schema (a file's name)
            fields = out.setdefault(kind, set())
            for kw in node.keywords:
                if kw.arg is not None:
                    fields.add(kw.arg)
                elif isinstance(kw.value, ast.Name):  # **identity = module_identity(...)
                    fields |= _returned_keys(tree, calls[kw.value.id])
                else:
                    assert kind in OPEN_KINDS, (name, kind, ast.unparse(kw.value))
    return out


def test_the_event_classes_are_the_fields_the_harness_writes_both_ways() -> None:
    """The event classes are the schema: every field the harness writes is a field of its
    kind's class, and every field of a class is one the harness writes."""
    written = _written_fields()
    assert set(written) == set(event_kinds.KINDS)
    for kind, fields in written.items():
        cls = event_kinds.KINDS[kind]
        assert cls.KIND == kind and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        # `edges`: Events.write adds it to every line (the step records before it)
        known = {f.name for f in dataclasses.fields(cls)} - {"t", "raw", "edges"}
        assert fields == known, (kind, "written, not known:", fields - known,
                                 "known, never written:", known - fields)


def test_every_line_of_real_runs_parses_into_its_kind(tmp_path: Path) -> None:
    """A real collect (steps, a Python warning, a module's compile), a real collect whose
    script runs its own profiler, and a real auto PGLE run: every line they wrote is typed."""
    (tmp_path / "w.py").write_text(WORKLOAD)
    proc = run_pgle("collect", "w.py", "--steps", "2:3", "-o", "p.pb", "--allow-empty", "--json",
                    "--run-dir", "c", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    collect = parsed(lines_of(Path(report_of(proc)["run_dir"]) / "events.jsonl"))

    (tmp_path / "own.py").write_text(OWN_TRACE)
    proc = run_pgle("collect", "own.py", "-o", "q.pb", "--allow-empty", "--json",
                    "--run-dir", "s", "--", str(tmp_path / "own-trace"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    own = parsed(lines_of(Path(report_of(proc)["run_dir"]) / "events.jsonl"))

    proc = run_pgle("auto", "--runs", "2", "--json", "--run-dir", "a",
                    str(WORKLOADS / "auto_fgh.py"), "--", "--f", "3", "--g", "1", "--h", "0",
                    cwd=tmp_path, env=pgle_env(PYTHONPATH=str(TESTS / "helpers" /
                                                              "pgle_cpu_profile")))
    assert proc.returncode in (0, 1), proc.stderr.decode()[-3000:]
    auto = parsed(lines_of(Path(report_of(proc)["run_dir"]) / "events.jsonl"))

    kinds = {e.kind for e in collect + own + auto}
    assert {schema.START, schema.JAX_IMPORTED, schema.BACKEND, schema.COMPILE,
            schema.STEP_NAME, schema.TRACE_START, schema.TRACE_STOP,
            schema.MODULE_COMPILED, schema.OBSERVE_MODULES, schema.XLA_COMPILE,
            schema.COMPILE_BEGIN, schema.COMPILE_END, schema.JIT_FUNCTIONS, schema.EXIT,
            schema.WARNING, schema.STACKS, schema.SCRIPT_TRACE, schema.XLA_FLAGS_SEEN,
            schema.OBSERVE_PGLE, schema.PGLE_PROFILED, schema.LOG} <= kinds, kinds
    # The typed reader picks out the same events.
    events = read_events(Path(report_of(proc)["run_dir"]) / "events.jsonl")
    assert events.rejected == 0 and events.backend is not None
    assert events.backend.platform == "cpu"
    stops = [e for e in collect if isinstance(e, TraceStop)]
    assert [(s.purpose, s.first_step, s.steps) for s in stops] == [("window", 2, 3)]
    assert [s.call for s in own if isinstance(s, ScriptTrace)] == ["start", "stop"]
    assert [s.purpose for s in own if isinstance(s, TraceStop)] == ["script"]


HOSTILE = [
    {"kind": "trace_stop", "t": 5.0, "purpose": "rm -rf /", "dir": "/x"},  # not a purpose
    {"kind": "trace_stop", "t": 5.0, "purpose": "window", "steps": "3"},  # a string count
    {"kind": "trace_stop", "t": 5.0, "purpose": "window", "dir": ["/", "etc"]},
    {"kind": "backend", "t": 1.0, "platform": {"__class__": "x"}},
    {"kind": "exit", "t": 9.0, "code": True},  # a bool is no exit code
    {"kind": "step_enter", "t": 3.0},  # no index
    {"kind": "module_compiled", "t": 2.0, "module": "m", "memory": {"1": [1, 2]}},
    {"kind": "jit_functions", "t": 2.0, "starts": [1.0, "2"]},
    {"kind": 7, "t": 1.0},
    {"kind": "exit", "code": 0},  # no time
    {"kind": "exit", "t": "soon", "code": 0},
    {"kind": "script_trace", "t": 4.0, "call": "restart"},
]


@pytest.mark.parametrize("record", HOSTILE, ids=lambda r: f"{r.get('kind')}")
def test_a_record_with_a_field_the_harness_never_writes_is_rejected(record: dict[str, Any]
                                                                    ) -> None:
    assert parse(record) is None


def test_a_hostile_events_file_is_read_without_a_crash(tmp_path: Path) -> None:
    """Another user's run folder: the events that are events are read, the rest counted."""
    good = [{"kind": "backend", "t": 1.0, "platform": "gpu", "device_count": 8,
             "device_kind": "NVIDIA H100", "process_count": 1, "process_index": 0},
            {"kind": "trace_stop", "t": 6.0, "purpose": "window", "dir": "/t", "first_step": 2,
             "steps": 3, "seconds": 1.5}]
    text = "".join(json.dumps(r) + "\n" for r in [good[0], *HOSTILE, good[1]])
    text += "[1, 2]\n\"a string\"\n{\"kind\": \"exit\", \"t\": 1e999, \"code\": 0}\n"
    text += "[" * 100_000 + "]" * 100_000 + "\n"  # deeper than json.loads recurses
    text += "\x00\xff garbage\n{\"kind\": \"exit\", \"t\": 9, \"code\":"
    path = tmp_path / "events.jsonl"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    events = read_events(path)
    assert events.backend == parse(good[0]) and isinstance(events.backend, Backend)
    assert events.trace is not None and events.trace.steps == 3
    assert events.trace.to_dict() == good[1]
    assert events.rejected == len(HOSTILE) - 1  # the step_enter line is a step line
    # 1e999 reads as inf: a float, kept (a time from a broken clock is still a time)
    assert events.exit is not None and events.exit.code == 0


def test_an_unknown_kind_is_kept_as_it_was(tmp_path: Path) -> None:
    """A newer harness's kind (a run folder shared by a colleague with a newer pgle)."""
    future = {"kind": "gpu_clock", "t": 2.0, "mhz": 1980, "device": 3}
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"kind": "start", "t": 1.0, "pid": 4, "argv": ["w.py"], "python": "3.11"}, future,
        {"kind": "exit", "t": 3.0, "code": 0, "error": None, "interrupted": False}]))
    events = read_events(path)
    assert events.rejected == 0 and [e.kind for e in events.records] == [
        "start", "gpu_clock", "exit"]
    (unknown,) = [e for e in events.records if isinstance(e, UnknownEvent)]
    assert unknown.to_dict() == future and unknown.t == 2.0
    assert events.exit is not None and events.exit.code == 0
