"""A run folder as `pgle run`, `collect` and `estimate` read it (issue 37), in process: a
command's several Python processes (procs/<pid>/events.jsonl) read into one run, a process row
each; how a report names the workload's non-zero exit (pinned whole: users read it); the module
rows with the step's module first, by executions. The files are written as the harness writes
them (pgle.launch.harness `Events`)."""

from __future__ import annotations

import array
import json
from pathlib import Path
from typing import Any

from pgle.evidence import schema, step_file
from pgle.evidence.events import read_events, read_run_events, workload_exit_phrase
from pgle.evidence.jit_steps import executions_by_module, step_first

T0 = 1_764_000_000.0


def events_file(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({**r, "t": T0 + i, "edges": 0}) + "\n"
                            for i, r in enumerate(records)))
    return path


def process(pid: int, argv: list[str], index: int | None, code: int | None,
            module: str, steps: int = 0, trace: bool = False) -> list[dict[str, Any]]:
    """One Python process's events: it started, imported jax, compiled `module` (the
    harness's XLA compile and module records), marked `steps` steps (old step_enter lines),
    maybe kept a trace, and exited with `code` (None: no exit record, killed)."""
    out: list[dict[str, Any]] = [
        {"kind": "start", "pid": pid, "argv": argv, "python": "3.11.7", "ppid": 1},
        {"kind": "jax_imported", "version": "0.10.2"},
        {"kind": "backend", "platform": "cpu", "device_count": 1, "local_device_count": 1,
         "device_kind": "cpu", "process_index": index, "process_count": 2},
        {"kind": "observe_modules", "installed": True},
        {"kind": "xla_compile", "platform": "cpu", "thread": str(pid + 1), "pid": pid},
        {"kind": "module_compiled", "module": module, "flops": 10.0},
    ]
    out += [{"kind": "step_enter", "index": i, "name": "train", "step_num": i}
            for i in range(steps)]
    if trace:
        out.append({"kind": "trace_stop", "purpose": "window", "first_step": 1, "steps": 1})
    if code is not None:
        out.append({"kind": "exit", "code": code})
    return out


def test_a_command_s_processes_are_read_into_one_run(tmp_path: Path):
    run = tmp_path / "run"
    main = events_file(run / "events.jsonl",
                       process(100, ["train.py"], 0, 0, "jit_step", steps=3, trace=True))
    events_file(run / schema.PROCS_DIR / "1200" / "events.jsonl",
                process(1200, ["eval.py", "--fast"], 1, None, "jit_eval"))
    events_file(run / schema.PROCS_DIR / "300" / "events.jsonl",
                process(300, ["-c", "import jax"], None, 3, "jit_init"))
    events_file(run / schema.PROCS_DIR / "a-host" / "events.jsonl",  # no pid's name: last
                process(77, ["x.py"], None, 0, "jit_x"))
    for pid in (40000, 9, 10):  # by pid, not by name
        events_file(run / schema.PROCS_DIR / str(pid) / "events.jsonl",
                    [{"kind": "start", "pid": pid}])
    (run / schema.PROCS_DIR / "300-old").mkdir()  # no events: no row
    (run / schema.PROCS_DIR / "notes.txt").write_text("not a process folder")
    (run / schema.PROCS_DIR / "empty").mkdir()
    (run / schema.PROCS_DIR / "empty" / "events.jsonl").write_text("")
    ev = read_run_events(main)
    # this process's own events, the others' compiles and modules added, by pid
    assert [s.index for s in ev.steps] == [0, 1, 2] and ev.exit is not None
    assert [r.pid for r in ev.xla_compiles] == [100, 300, 1200, 77]
    assert [m.module for m in ev.modules] == ["jit_step", "jit_init", "jit_eval", "jit_x"]
    assert ev.compile_threads == ("101", "301", "1201", "78", "100", "300", "1200", "77")
    started = [{"pid": pid, "argv": None, "dir": str(run / "procs" / str(pid)),
                "process_index": None, "process_count": None, "exit_code": None, "steps": 0,
                "trace": False} for pid in (9, 10, 40000)]
    assert ev.processes == [
        {"pid": 100, "argv": ["train.py"], "dir": str(run), "process_index": 0,
         "process_count": 2, "exit_code": 0, "steps": 3, "trace": True},
        *started[:2],
        {"pid": 300, "argv": ["-c", "import jax"], "dir": str(run / "procs" / "300"),
         "process_index": None, "process_count": 2, "exit_code": 3, "steps": 0,
         "trace": False},
        {"pid": 1200, "argv": ["eval.py", "--fast"], "dir": str(run / "procs" / "1200"),
         "process_index": 1, "process_count": 2, "exit_code": None, "steps": 0,
         "trace": False},
        started[2],
        {"pid": 77, "argv": ["x.py"], "dir": str(run / "procs" / "a-host"),
         "process_index": None, "process_count": 2, "exit_code": 0, "steps": 0,
         "trace": False},
    ]


def test_a_process_without_its_start_or_backend_records_has_empty_cells(tmp_path: Path):
    run = tmp_path / "run"
    main = events_file(run / "events.jsonl", [{"kind": "jax_imported", "version": "0.10.2"}])
    events_file(run / "procs" / "7" / "events.jsonl", [{"kind": "exit", "code": 1}])
    assert read_run_events(main).processes == [
        {"pid": None, "argv": None, "dir": str(run), "process_index": None,
         "process_count": None, "exit_code": None, "steps": 0, "trace": False},
        {"pid": None, "argv": None, "dir": str(run / "procs" / "7"), "process_index": None,
         "process_count": None, "exit_code": 1, "steps": 0, "trace": False},
    ]


def test_one_process_is_read_as_its_events_file(tmp_path: Path):
    main = events_file(tmp_path / "events.jsonl", process(100, ["train.py"], 0, 0, "jit_step"))
    ev = read_run_events(main)
    assert ev.processes == [] and [m.module for m in ev.modules] == ["jit_step"]
    (tmp_path / "procs").mkdir()
    (tmp_path / "procs" / "5").mkdir()  # a process that wrote nothing
    assert read_run_events(main).processes == []
    assert read_run_events(main).modules == read_events(main).modules


def test_how_a_report_names_the_workload_s_exit(tmp_path: Path):
    none = read_events(tmp_path / "missing.jsonl")
    started = read_events(events_file(tmp_path / "a" / "events.jsonl", [
        {"kind": "start", "pid": 1}]))
    imported = read_events(events_file(tmp_path / "b" / "events.jsonl", [
        {"kind": "start", "pid": 1}, {"kind": "jax_imported", "version": "0.10.2"}]))
    assert workload_exit_phrase(3, none, command=True) == (
        "the command exited with code 3 (its own code, passed through) and no Python process "
        "of it imported jax under pgle's harness (it travels by PYTHONPATH: a python started "
        "with -I, -E or -S does not read it)")
    assert workload_exit_phrase(2, started) == (
        "the workload exited with code 2 before importing jax (its own code, passed through; "
        "not pgle's exit 2 for bad input)")
    assert workload_exit_phrase(2, started, command=True) == (
        "the workload exited with code 2 before importing jax (its own code, passed through; "
        "not pgle's exit 2 for bad input)")
    assert workload_exit_phrase(137, imported) == (
        "the workload exited with code 137, killed by SIGKILL")
    assert workload_exit_phrase(143, started) == (
        "the workload exited with code 143, killed by SIGTERM before importing jax (its own "
        "code, passed through; not pgle's exit 2 for bad input)")
    assert workload_exit_phrase(129, imported) == (
        "the workload exited with code 129, killed by SIGHUP")
    # 128 and 160 are no signal's; 158 (signal 30) is SIGPWR on Linux
    assert workload_exit_phrase(128, imported) == "the workload exited with code 128"
    assert workload_exit_phrase(160, imported) == "the workload exited with code 160"
    assert workload_exit_phrase(159, imported) == (
        "the workload exited with code 159, killed by SIGSYS")
    assert workload_exit_phrase(1, none) == "the workload exited with code 1"


def _jit_functions(tmp_path: Path, step: str | None, functions: list[dict[str, Any]]):
    return read_events(events_file(tmp_path / "events.jsonl", [
        {"kind": "jit_functions", "step": f"jit({step})" if step else None,
         "module": step and f"jit_{step}", "functions": functions, "starts": [], "work": []}]))


def test_module_rows_put_the_step_s_module_first_then_by_executions(tmp_path: Path):
    ev = _jit_functions(tmp_path, "train", [
        {"function": "jit(eval)", "module": "jit_eval", "executions": 40},
        {"function": "jit(train)", "module": "jit_train", "executions": 12},
        {"function": "jit(eval_b)", "module": "jit_eval", "executions": 2},  # one module
        {"function": "jit(init)", "module": "jit_init", "executions": None},
        {"function": "jit(once)", "module": "jit_once", "executions": 1},
        {"function": "jit(f)", "module": None, "executions": 9},  # no module: not a row
    ])
    assert executions_by_module(ev) == {"jit_eval": 42, "jit_train": 12, "jit_init": 0,
                                        "jit_once": 1}
    rows = [{"module": "jit_other"}, {"module": "jit_init"}, {"module": "jit_once"},
            {"module": "jit_eval"}, {"module": "jit_train"},
            {"module": "jit_unseen", "executions": 5}]
    # a module seen executing 0 times sorts with those never seen, after one seen once
    assert step_first(rows, ev) == [
        {"module": "jit_train", "executions": 12}, {"module": "jit_eval", "executions": 42},
        {"module": "jit_unseen", "executions": 5}, {"module": "jit_once", "executions": 1},
        {"module": "jit_other"}, {"module": "jit_init", "executions": 0}]


def test_without_a_step_the_rows_go_by_executions_alone(tmp_path: Path):
    ev = _jit_functions(tmp_path, None, [
        {"function": "jit(a)", "module": "jit_a", "executions": 2},
        {"function": "jit(b)", "module": "jit_b", "executions": 3}])
    rows = [{"module": "jit_a"}, {"module": "jit_b"}, {"module": "jit_c"}]
    assert step_first(rows, ev) == [{"module": "jit_b", "executions": 3},
                                    {"module": "jit_a", "executions": 2}, {"module": "jit_c"}]
    assert step_first([{"module": "jit_a"}], read_events(tmp_path / "none.jsonl")) == [
        {"module": "jit_a"}]
    assert executions_by_module(read_events(tmp_path / "none.jsonl")) == {}


def test_a_step_is_found_by_its_index(tmp_path: Path):
    ev = read_events(events_file(tmp_path / "events.jsonl", [
        {"kind": "step_enter", "index": i, "name": "train", "step_num": i} for i in (0, 1, 3)]))
    assert [(s.index, s.t_enter) for s in map(ev.steps.find, (0, 1, 3))] == [
        (0, T0), (1, T0 + 1), (3, T0 + 2)]
    assert ev.steps.find(2) is None and ev.steps.find(4) is None and ev.steps.find(-1) is None


def test_step_names_are_those_the_step_name_events_define(tmp_path: Path):
    # steps.bin as the harness writes it: name ids its step_name events define ("eval": 1),
    # or none (7: a name id whose event was lost reads as "")
    events_file(tmp_path / "events.jsonl", [{"kind": "step_name", "id": 1, "name": "eval"}])
    fd = step_file.open_for_append(str(tmp_path / step_file.NAME))
    t = int(T0) * 1_000_000_000
    step_file.os.write(fd, step_file.encode(array.array("q", [
        t, 0, 0, 1, -(t + 5), 0, 0, 1, t + 10, 1, 1, 7, t + 20, 2, 2, 1])))
    step_file.os.close(fd)
    ev = read_events(tmp_path / "events.jsonl")
    assert [(s.index, s.name, s.step_num) for s in ev.steps] == [
        (0, "eval", 0), (1, "", 1), (2, "eval", 2)]


def test_the_step_file_is_made_as_any_file_the_harness_writes(tmp_path: Path):
    # rw for whom the umask lets, never executable; its header written once
    path = str(tmp_path / step_file.NAME)
    umask = step_file.os.umask(0o022)
    try:
        step_file.os.close(step_file.open_for_append(path))
        step_file.os.close(step_file.open_for_append(path))  # a second writer: no header
    finally:
        step_file.os.umask(umask)
    assert (tmp_path / step_file.NAME).stat().st_mode & 0o777 == 0o644
    assert (tmp_path / step_file.NAME).read_bytes() == step_file.HEADER
