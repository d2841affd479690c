"""The sentences of a log that cannot be this run's, in process (issue 37; pgle/verdicts/
origin.py): the platforms the harness saw XLA compile for, and the threads that compiled. The
end-to-end tests (test_origin.py) run `pgle run` in a subprocess, which mutmut does not map.
"""

from __future__ import annotations

import io

from pgle.evidence.xla_log import Evidence, LogScanner
from pgle.verdicts.origin import Origin
from pgle.verdicts.pgle_applied import judge

S, P = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"


def absl(sev: str, tid: int, file: str, msg: str) -> str:
    return f"{sev}0822 12:34:56.789012  {tid} {file}:538] {msg}"


def _evidence(lines: list[str]) -> Evidence:
    return LogScanner().scan_stream(io.BytesIO(("\n".join(lines) + "\n").encode()))


def _modules(tids: list[int]) -> Evidence:
    """One fully covered module per thread id: three XLA:GPU scheduler lines each."""
    lines = []
    for i, t in enumerate(tids):
        lines += [absl("I", t, S, "Using PGLE profile from /p.pb"),
                  absl("I", t, S, f"Found profile for module jit_{i}, using profile guided "
                                  "latency estimator"),
                  absl("W", t, P, "Found 3 instructions from the profile.")]
    return _evidence(lines)


FIVE = [11, 12, 13, 14, 15]
TAIL = ("(pgle's harness sees every compile): XLA:GPU did not print them in this run (the "
        "workload printed or copied them), so nothing of this run used a profile; PGLE is an "
        "XLA:GPU feature.")


def _foreign(evidence: Evidence, origin: Origin) -> str:
    v = judge(evidence, origin=origin)
    assert (v.status, v.modules, len(v.reasons)) == ("not_applicable", [], 1)
    assert v.details == {"not_counted": {"reason": v.reasons[0],
                                         "xla_lines": evidence.pgle_lines}}
    return v.reasons[0]


def test_a_log_from_a_run_that_compiled_for_no_gpu():
    assert _foreign(_modules(FIVE), Origin(compile_platforms=("tpu", "cpu", "cpu"))) == (
        f"the log holds 15 XLA:GPU scheduler lines, but this run compiled only for cpu, tpu {TAIL}")
    assert _foreign(_modules(FIVE), Origin(compile_platforms=())) == (
        f"the log holds 15 XLA:GPU scheduler lines, but this run compiled nothing {TAIL}")
    # A profile read and no module yet: XLA:GPU's line all the same.
    read_only = _evidence([absl("I", 7, S, "Using PGLE profile from /p.pb")])
    assert _foreign(read_only, Origin(compile_platforms=("cpu",))) == (
        f"the log holds 1 XLA:GPU scheduler line, but this run compiled only for cpu {TAIL}")
    # One GPU compile (in any case) is enough: the lines count.
    v = judge(_modules(FIVE), origin=Origin(compile_platforms=("cpu", "CUDA")))
    assert (v.status, v.reasons) == ("applied", ["5 of 5 modules applied the profile."])
    # No XLA:GPU line: nothing to refuse, the verdict says what it always says.
    v = judge(_evidence(["unrelated"]), origin=Origin(compile_platforms=("cpu",),
                                                      compile_threads=("1",)))
    assert v.status == "not_applied" and "not_counted" not in v.details
    assert v.reasons[0].startswith("no PGLE line in the log")


def test_a_log_from_threads_that_compiled_nothing():
    assert _foreign(_modules(FIVE), Origin(compile_threads=("1", "2", "3", "4", "5"))) == (
        "the log's XLA:GPU lines come from threads 11, 12, 13, 14 and 1 more, none of which "
        "compiled anything in this run (pgle's harness records the id of every thread that "
        "compiled: 1, 2, 3, 4 and 1 more): another process printed them, so they are not "
        "counted.")
    assert _foreign(_modules([7]), Origin(compile_threads=("1",))) == (
        "the log's XLA:GPU lines come from thread 7, none of which compiled anything in this "
        "run (pgle's harness records the id of every thread that compiled: 1): another process "
        "printed them, so they are not counted.")
    # One of the log's threads compiled: the lines are this run's.
    v = judge(_modules(FIVE), origin=Origin(compile_threads=("15", "99"),
                                            compile_platforms=("gpu",)))
    assert (v.status, v.reasons) == ("applied", ["5 of 5 modules applied the profile."])


def test_a_profile_directory_whose_name_ends_in_a_space():
    from pgle.verdicts.origin import path_matcher

    match = path_matcher("/p/dir ")
    assert match("/p/dir /0123.pbtxt") and not match("/p/dir/0123.pbtxt")
    root = path_matcher("/")
    assert root("/p/x.pb")
