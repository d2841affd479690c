"""The verdicts of `pgle auto`, `prewarm` and `nsys`, in process (issue 37): each module's status,
reason and fix from the facts JAX's log gave, the profiler collision and its sentence, and the
exit code of --require / --require-all. The commands' end-to-end tests run them in subprocesses,
which mutmut does not map; these pin what a user reads, row by row.
"""

from __future__ import annotations

import pytest

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.evidence.event_kinds import PgleSessionError, ScriptTrace
from pgle.evidence.jax_log import ModuleFacts, RunFacts
from pgle.report import Report
from pgle.verdicts import auto_pgle as ap


def _facts(*mods: ModuleFacts, observed: bool = True) -> RunFacts:
    return RunFacts({m.module: m for m in mods}, observed=observed)


def _rows(facts: RunFacts, runs: int = 2, platform: str | None = "gpu", **kw) -> dict:
    return {r.module: r for r in ap.auto_rows(facts, runs, platform, **kw)}


def test_wording():
    assert ap.times(1) == "1 time" and ap.times(3) == "3 times"
    mods = [{"status": "optimized"}, {"status": "not_optimized"}, {"status": "optimized"}]
    assert ap.count_line(mods, "optimized", "optimized") == "2 of 3 modules optimized"
    assert ap.count_line([], "optimized", "x") == "0 of 0 modules x"
    assert ap.empty_profile_cause("cpu") == (
        "the backend is cpu: the JAX profiler records no device kernels there, so every "
        "profile is empty (PGLE is an NVIDIA GPU feature)")
    for platform in ("gpu", "cuda", None, ""):
        assert ap.empty_profile_cause(platform).startswith("CUPTI contention (Nsight Systems")


def test_each_auto_row_says_why():
    facts = _facts(
        ModuleFacts("a_opt", profiled=2, fdo_lengths=[100, 300]),
        ModuleFacts("b_cached", hits=["k1"]),
        ModuleFacts("c_empty", profiled=2, empty_profiles=2),
        ModuleFacts("d_profiled_only", profiled=2, empty_profiles=1),
        ModuleFacts("e_too_few", profiled=1),
        ModuleFacts("f_never", profiled=0),
        ModuleFacts("g_own_runs", profiled=4, runs=5),
    )
    rows = _rows(facts, known_pgle_keys={"k1"})
    assert list(rows) == sorted(rows)
    r = rows["a_opt"]
    assert (r.status, r.reason, r.profile_bytes, r.runs, r.profiled_executions) == (
        "optimized", "recompiled with a 300-byte profile after 2 profiled executions", 300, 2, 2)
    r = rows["b_cached"]
    assert (r.status, r.from_cache, r.reason) == (
        "optimized", True, "loaded its PGLE-optimized executable from the compilation cache")
    r = rows["c_empty"]
    assert (r.status, r.fix) == ("empty_profile",
                                 "run on an NVIDIA GPU with no other CUPTI client attached")
    assert r.reason.startswith("all 2 profiled executions gave an empty profile: CUPTI")
    assert (r.empty_profiles, r.profile_bytes) == (2, None)
    r = rows["d_profiled_only"]
    assert (r.status, r.reason, r.fix) == (
        "not_optimized", "profiled 2 times but never executed again: auto PGLE recompiles on "
        "execution 3", "run more steps, or lower --runs")
    r = rows["e_too_few"]
    assert (r.reason, r.fix) == ("executed 1 time; auto PGLE needs 3 (2 profiled, then the "
                                 "recompile)", "run more steps, or lower --runs")
    r = rows["f_never"]
    assert (r.reason, r.fix) == (
        "never profiled: compiled ahead of time (`.lower().compile()`), or not executed", None)
    r = rows["g_own_runs"]
    assert r.runs == 5 and r.reason == ("executed 4 times; auto PGLE needs 6 (5 profiled, then "
                                        "the recompile)")
    # One profiled execution of a one-run module that gave an empty profile, on CPU.
    r = _rows(_facts(ModuleFacts("h", profiled=1, empty_profiles=1)), runs=1, platform="cpu")["h"]
    assert r.status == "empty_profile" and r.reason.startswith(
        "the 1 profiled execution gave an empty profile: the backend is cpu")
    # The cache hit of a key that is not PGLE's is no optimization.
    assert _rows(_facts(ModuleFacts("b", hits=["k2"])), known_pgle_keys={"k1"})["b"].status == \
        "not_optimized"


def test_without_the_observer_only_the_log_speaks():
    rows = _rows(_facts(ModuleFacts("a", profiled=3, empty_profiles=3),
                        ModuleFacts("b", fdo_lengths=[7]), observed=False))
    assert (rows["a"].status, rows["a"].reason) == ("not_optimized",
                                                    "no recompilation with a profile was logged")
    assert (rows["a"].profiled_executions, rows["a"].empty_profiles) == (None, None)
    assert rows["b"].status == "optimized"


def _err(t, module, thread=1, holder=None, holder_thread=None) -> PgleSessionError:
    return PgleSessionError(t=t, module=module, thread=thread, error="ALREADY_EXISTS",
                            holder_module=holder, holder_thread=holder_thread)


def _trace(t, call, site=None) -> ScriptTrace:
    return ScriptTrace(t=t, call=call, site=site)


def test_no_collision_without_a_failure(tmp_path):
    log = tmp_path / "log"
    log.write_text("all fine\n")
    assert ap.profiler_collision(log, [], [_trace(1.0, "start", "a.py:3")]) is None
    assert ap.profiler_collision(tmp_path / "no-log", [], []) is None


def test_a_collision_between_threads(tmp_path):
    errors = [_err(5.0, "jit_a", 11, "jit_b", 12), _err(6.0, "jit_c", 13, "jit_b", 12),
              _err(7.0, "jit_a", 11, "jit_b", 12)]
    c = ap.profiler_collision(tmp_path / "log", errors, [])
    assert (c.kind, c.modules, c.fix) == ("threads", frozenset({"jit_a", "jit_c"}), ap.THREADS_FIX)
    assert c.row == "not profiled: another thread's profiling session held the profiler"
    assert c.text == (
        "jitted functions ran at once in several threads, and auto PGLE profiles one execution "
        "at a time per process: jit_a (thread 11) could not start its profiling session while "
        "jit_b (thread 12) was profiled (ALREADY_EXISTS: Another profiling session active); "
        f"3 profiling sessions failed, 2 pairs of modules. Fix: {ap.THREADS_FIX}")
    one = ap.profiler_collision(tmp_path / "log", errors[:1], [])
    assert one.text.endswith(f"; 1 profiling session failed. Fix: {ap.THREADS_FIX}")


def test_a_collision_with_the_scripts_own_profiler(tmp_path):
    traces = [_trace(1.0, "start", "train.py:40"), _trace(3.0, "stop"),
              _trace(8.0, "start", "train.py:90")]
    # A session failed while the script's second trace was open.
    c = ap.profiler_collision(tmp_path / "log", [_err(9.0, "jit_a")], traces)
    assert (c.kind, c.fix, c.modules) == ("script", ap.SCRIPT_FIX, frozenset({"jit_a"}))
    assert c.text == (
        "the workload runs its own profiler (jax.profiler.start_trace at train.py:90) while auto "
        "PGLE profiles; auto PGLE's profiling session collides with it (ALREADY_EXISTS: Another "
        "profiling session active), so its executions were not profiled (1 profiling session "
        f"failed). Fix: {ap.SCRIPT_FIX}")
    assert c.row == "not profiled: the workload's own profiler held the profiling session"
    # Failed between the script's traces: not the script's.
    c = ap.profiler_collision(tmp_path / "log", [_err(5.0, "jit_a")], traces)
    assert c.kind == "other" and c.text.endswith("(a profiler server, a library's own trace); "
                                                 "1 profiling session failed")
    # Only JAX's words in the log, no harness record: the script's first trace, no count.
    log = tmp_path / "log"
    log.write_bytes(b"E ... Profile has already been started ...\n")
    c = ap.profiler_collision(log, [], [_trace(1.0, "start")] + traces)
    assert c.kind == "script" and "(jax.profiler.start_trace) while" in c.text
    assert "failed" not in c.text and c.modules == frozenset()
    c = ap.profiler_collision(log, [], [])
    assert c.kind == "other" and c.text.endswith("(a profiler server, a library's own trace)")
    assert c.row == "not profiled: another profiling session held the profiler"
    assert c.fix.startswith("find what else starts the JAX profiler")
    for words in ap.PROFILER_COLLISION:
        log.write_text(f"x {words} y\n")
        assert ap.profiler_collision(log, [], []) is not None


def test_a_collision_names_only_the_modules_it_hit():
    facts = _facts(ModuleFacts("a", profiled=0), ModuleFacts("b", profiled=0),
                   ModuleFacts("c", fdo_lengths=[5]))
    hit = ap.Collision("threads", "text", "row", "fix", frozenset({"a", "c"}))
    rows = _rows(facts, collision=hit)
    assert (rows["a"].reason, rows["a"].fix, rows["a"].collision) == ("row", "fix", "threads")
    assert rows["b"].collision is None and rows["b"].reason.startswith("never profiled")
    assert rows["c"].status == "optimized" and rows["c"].collision is None
    anyone = ap.Collision("other", "text", "row", "fix", frozenset())
    rows = _rows(facts, collision=anyone)
    assert rows["a"].collision == rows["b"].collision == "other"


def test_auto_and_prewarm_statuses():
    assert ap.auto_status([{"status": "not_optimized"}, {"status": "optimized"}]) == "optimized"
    assert ap.auto_status([{"status": "not_optimized"}, {"status": "empty_profile"}]) == \
        "empty_profile"
    assert ap.auto_status([{"status": "not_optimized"}]) == "not_optimized"
    assert ap.auto_status([]) == "not_optimized"
    assert ap.prewarm_status([]) == "not_optimized"
    assert ap.prewarm_status([{"status": "empty_profile"}]) == "not_optimized"
    assert ap.prewarm_status([{"status": "optimized"}]) == "optimized"


def test_prewarm_rows_say_whether_the_entry_landed():
    facts = _facts(
        ModuleFacts("a_written", profiled=2, fdo_lengths=[9], misses=["p1", "f1"],
                    writes=["p1"], pgle_keys=["p1"]),
        ModuleFacts("b_there", hits=["p2"]),
        ModuleFacts("c_evicted", profiled=2, fdo_lengths=[9], misses=["p3"], pgle_keys=["p3"]),
        ModuleFacts("d_callbacks", profiled=2, fdo_lengths=[9], misses=["p4"], pgle_keys=["p4"],
                    not_written=["it uses host callbacks", "it uses host callbacks"]),
        ModuleFacts("e_not_written", profiled=1, misses=["f5"],
                    not_written=["the cache is full", "later"]),
        ModuleFacts("f_written_plain", profiled=1, misses=["f6"], writes=["f6"],
                    not_written=["x"]),
    )
    rows = {r["module"]: r for r in ap.prewarm_modules(facts, 2, "gpu", {"p1", "p2"},
                                                       {"p2"})}
    a = rows["a_written"]
    assert (a["status"], a["reason"], a["fix"]) == ("optimized", "PGLE-optimized entry written",
                                                    None)
    assert (a["first_pass_keys"], a["pgle_optimized_keys"], a["executions_seen"]) == \
        (["f1"], ["p1"], 3)
    b = rows["b_there"]
    assert (b["status"], b["reason"]) == ("optimized", "PGLE-optimized entry already in the cache")
    assert (b["pgle_optimized_keys"], b["first_pass_keys"], b["executions_seen"]) == \
        (["p2"], [], 0)
    c = rows["c_evicted"]
    assert (c["status"], c["reason"], c["fix"]) == (
        "not_optimized", "recompiled with a profile but JAX did not keep it: the entry is not on "
        "disk (evicted?)", "unset JAX_COMPILATION_CACHE_MAX_SIZE")
    d = rows["d_callbacks"]
    assert (d["reason"], d["fix"]) == (
        "recompiled with a profile but JAX did not keep it: it uses host callbacks",
        "host callbacks (jax.debug.print, pure_callback) keep JAX from caching a module")
    e = rows["e_not_written"]
    assert (e["status"], e["reason"]) == ("not_optimized",
                                          "JAX did not write it: the cache is full")
    f = rows["f_written_plain"]
    assert f["reason"].startswith("executed 1 time")
    assert ap.prewarm_modules(_facts(ModuleFacts("x", fdo_lengths=[1]), observed=False), 2, "gpu",
                              set(), set())[0]["executions_seen"] is None


def test_prewarm_on_a_process_other_than_0():
    facts = _facts(ModuleFacts("a", profiled=2, fdo_lengths=[9], misses=["p1"], pgle_keys=["p1"]),
                   ModuleFacts("b", profiled=2, empty_profiles=2),
                   ModuleFacts("c", profiled=1))
    rows = {r["module"]: r for r in ap.prewarm_modules(facts, 2, "gpu", set(), set(),
                                                       writer=False)}
    assert rows["a"]["status"] == "optimized"
    assert rows["a"]["reason"] == ("recompiled with a 9-byte profile after 2 profiled executions; "
                                   "process 0 writes its cache entry (JAX writes from process 0 "
                                   "only)")
    assert rows["b"]["status"] == "not_optimized"
    assert rows["c"]["status"] == "not_optimized"
    assert rows["c"]["reason"].startswith("executed 1 time")


def _nsys(facts: RunFacts, manifest: dict) -> dict:
    return {r["module"]: r for r in ap.nsys_modules(facts, manifest)}


def test_nsys_rows_say_what_loaded():
    manifest = {"environment": {"platform": "cpu"}, "modules": {
        "fell_gone": {"status": "optimized", "executions_seen": 3},
        "fell_plain": {"status": "not_optimized", "plain_keys": ["k"], "first_pass_keys": []},
        "fell_empty": {"status": "empty_profile", "profiled_executions": 2, "empty_profiles": 2,
                       "executions_seen": 2},
        "fell_empty_few": {"status": "not_optimized", "profiled_executions": 1,
                           "empty_profiles": 1, "executions_seen": 1},
        "fell_few": {"status": "not_optimized", "executions_seen": 2},
        "anew_gone": {"first_pass_keys": ["m1"]},
        "anew_changed": {"status": "optimized"},
    }}
    facts = _facts(
        ModuleFacts("loaded", pgle_loaded=True, pgle_miss=True),
        ModuleFacts("fell_gone", pgle_miss=True),
        ModuleFacts("fell_plain", pgle_miss=True, hits=["k"]),
        ModuleFacts("fell_empty", pgle_miss=True),
        ModuleFacts("fell_empty_few", pgle_miss=True),
        ModuleFacts("fell_few", pgle_miss=True),
        ModuleFacts("fell_unknown", pgle_miss=True),
        ModuleFacts("anew_gone", misses=["m1"]),
        ModuleFacts("anew_changed", expect_writes=["w"]),
        ModuleFacts("anew_never", misses=["m9"]),
        ModuleFacts("only_hits", hits=["h"], writes=["w2"]),
    )
    rows = _nsys(facts, manifest)
    assert "only_hits" not in rows
    assert list(rows) == sorted(rows)
    assert (rows["loaded"]["status"], rows["loaded"]["reason"]) == \
        ("loaded_optimized", "loaded its PGLE-optimized executable")
    r = rows["fell_gone"]
    assert (r["status"], r["prewarm_status"], r["prewarm_executions"]) == \
        ("fell_back", "optimized", 3)
    assert (r["reason"], r["fix"]) == (
        "prewarm wrote its PGLE-optimized entry, but it is gone (pruned or evicted) or its key "
        "changed; loaded the first-pass executable",
        "prewarm again; keep JAX_COMPILATION_CACHE_MAX_SIZE unset")
    r = rows["fell_plain"]
    assert (r["reason"], r["fix"]) == (
        "prewarm never ran it; an earlier EXPECT_PGLE run (e.g. `pgle nsys`) compiled and cached "
        "it without PGLE; loaded that", "run the same code path (and shapes) during prewarm")
    r = rows["fell_empty"]
    assert r["reason"] == (
        "loaded the first-pass executable: all 2 executions prewarm profiled gave an empty "
        "profile, so JAX never recompiled it with one: the backend is cpu: the JAX profiler "
        "records no device kernels there, so every profile is empty (PGLE is an NVIDIA GPU "
        "feature)")
    assert r["fix"] == "prewarm on an NVIDIA GPU with no other CUPTI client attached"
    assert rows["fell_empty_few"]["reason"].startswith(
        "loaded the first-pass executable: prewarm executed it 1 time, fewer than runs+1, and "
        "the 1 execution prewarm profiled gave an empty profile")
    r = rows["fell_few"]
    assert (r["reason"], r["fix"]) == (
        "loaded the first-pass executable: prewarm executed it 2 times, fewer than runs+1",
        "run more steps in prewarm, or lower --runs")
    assert rows["fell_unknown"]["reason"] == (
        "loaded the first-pass executable: prewarm executed it too few times, fewer than runs+1")
    assert rows["fell_unknown"]["prewarm_status"] is None
    assert (rows["anew_gone"]["status"], rows["anew_gone"]["reason"]) == (
        "compiled_anew", "prewarm's cache entry for it is gone (pruned or evicted); compiled anew")
    assert rows["anew_changed"]["reason"] == \
        "prewarm compiled it with a different key (shapes, flags or code changed)"
    assert rows["anew_never"]["reason"] == "prewarm never compiled it"
    assert rows["anew_never"]["fix"] == "run the same code path (and shapes) during prewarm"
    # No manifest at all, and a GPU's cause.
    assert _nsys(_facts(ModuleFacts("x", pgle_miss=True)), {})["x"]["prewarm_status"] is None
    gpu = {"modules": {"x": {"status": "empty_profile", "profiled_executions": 1,
                             "empty_profiles": 1}}}
    assert "CUPTI contention" in _nsys(_facts(ModuleFacts("x", pgle_miss=True)), gpu)["x"]["reason"]


@pytest.mark.parametrize("entry, empty", [
    ({"profiled_executions": 2, "empty_profiles": 2}, True),
    ({"profiled_executions": 2, "empty_profiles": 3}, True),
    ({"profiled_executions": 2, "empty_profiles": 1}, False),
    ({"profiled_executions": 0, "empty_profiles": 0}, False),
    ({"profiled_executions": 2}, False),
    ({}, False),
])
def test_all_profiles_empty(entry, empty):
    assert ap.all_profiles_empty(entry) is empty


def test_nsys_status():
    loaded, fell = {"status": "loaded_optimized"}, {"status": "fell_back"}
    assert ap.nsys_status([loaded, loaded]) == "loaded_optimized"
    assert ap.nsys_status([loaded, fell]) == "partial"
    assert ap.nsys_status([fell]) == "fell_back"
    assert ap.nsys_status([]) == "fell_back"


def test_require_and_the_exit_code():
    mods = [{"module": "jit_a", "status": "optimized"}, {"module": "jit_b", "status": "x"},
            {"module": "pmap_c", "status": "y"}]
    assert ap.required_failures(mods, ok="optimized", require_all=True, require=()) == \
        ["jit_b is x", "pmap_c is y"]
    assert ap.required_failures(mods, ok="optimized", require_all=False,
                                require=("jit_*", "nothing*")) == \
        ["jit_b is x", "no module matches --require nothing*"]
    assert ap.required_failures(mods, ok="optimized", require_all=True, require=("jit_*",)) == \
        ["jit_b is x", "pmap_c is y"]
    assert ap.required_failures(mods, ok="optimized", require_all=False, require=("JIT_A",)) == \
        ["no module matches --require JIT_A"]
    assert ap.required_failures(mods, ok="optimized", require_all=False, require=()) == []

    rep = Report("auto", "partial", modules=mods)
    assert ap.finish_code(rep, 0, "optimized", False, ("jit_a",)) == 0
    assert rep.summary == [] and rep.reasons == []
    assert ap.finish_code(rep, 0, "optimized", False, ("jit_b",)) == EXIT_NOT_VERIFIED
    assert rep.reasons == ["jit_b is x"] and rep.summary == ["not verified: jit_b is x"]
    rep = Report("auto", "partial", modules=mods)
    assert ap.finish_code(rep, 5, "optimized", True, ()) == 5
    assert rep.summary == ["the workload exited with code 5"] and rep.reasons == []
    rep = Report("auto", "partial", modules=mods)
    assert ap.finish_code(rep, -9, "optimized", True, (), exit_phrase="killed") == -9
    assert rep.summary == ["killed"]


# -- the job verdict of auto / prewarm / nsys across ranks ------------------------------------


def _auto(module, status, reason="r", executions=None):
    return {"module": module, "status": status, "reason": reason, "fix": None,
            "profiled_executions": executions}


def test_the_job_verdict_of_modules_across_ranks():
    from pgle.verdicts.across_ranks import JobReports, ModuleRule, combine_modules

    rule = ModuleRule("optimized", ap.auto_status, "auto PGLE", "optimized", keep=("cache",))
    reports = {
        0: {"command": "auto",
            "modules": [_auto("jit_a", "optimized"), _auto("jit_b", "optimized")],
            "log_path": "/r0/log", "workload_exit_code": 0, "backend": {"platform": "gpu"},
            "cache": {"dir": "/c"}, "reasons": ["same everywhere"], "other": 1},
        1: {"modules": [_auto("jit_a", "optimized"), _auto("jit_b", "not_optimized")],
            "reasons": ["same everywhere", "only on 1"]},
        2: {"modules": [_auto("jit_a", "optimized")], "reasons": ["same everywhere"]},
    }
    rep = combine_modules(JobReports("auto", 3, reports), rule, False, ())
    assert (rep.command, rep.status, rep.exit_code) == ("auto", "partial", 0)
    assert (rep.log_path, rep.workload_exit_code) == ("/r0/log", 0)
    assert rep.details == {"backend": {"platform": "gpu"}, "cache": {"dir": "/c"}}
    assert [m["module"] for m in rep.modules] == ["jit_a", "jit_b"]
    head = "1 of 2 modules optimized on every rank that reported (ranks 0-2); 1 on some ranks only"
    assert rep.reasons[0] == head + "."
    assert rep.reasons[1].startswith("jit_b: optimized on rank 0; not_optimized on rank 1")
    assert rep.reasons[1].endswith("; no evidence for it on rank 2.")
    assert rep.reasons[2:] == ["same everywhere", "rank 1: only on 1"]
    assert rep.summary[0] == f"auto PGLE: partial: {head}"
    # --require-all: jit_b fails, exit 3 and the sentence.
    rep = combine_modules(JobReports("auto", 3, reports), rule, True, ())
    assert rep.exit_code == EXIT_NOT_VERIFIED
    assert rep.summary[-1] == "not verified: jit_b is partial"
    assert rep.reasons[-1] == "jit_b is partial"
    # Every rank agrees: the workflow's own overall status, no mixed line.
    same = {r: {"modules": [_auto("jit_a", "optimized")]} for r in (0, 1)}
    rep = combine_modules(JobReports("prewarm", 2, same), rule, True, ("jit_a",))
    assert (rep.command, rep.status, rep.exit_code) == ("prewarm", "optimized", 0)
    assert rep.reasons == ["1 of 1 modules optimized on every rank that reported (ranks 0-1)."]
    assert rep.details == {}
    none = {0: {"modules": [_auto("jit_a", "not_optimized")]}}
    assert combine_modules(JobReports("auto", 1, none), rule, False, ()).status == "not_optimized"
