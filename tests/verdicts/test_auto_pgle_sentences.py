"""More of the auto-PGLE family's verdicts in process (issue 37): the profiler collision's
sentences and which trace was open, nsys's reasons by what prewarm recorded, prewarm's rows on
another platform and on another process, the exit code's sentences, and --require-applied's
line. The rows are built from the facts JAX's log gives (pgle.evidence.jax_log).
"""

from __future__ import annotations

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.evidence.event_kinds import PgleSessionError, ScriptTrace
from pgle.evidence.jax_log import ModuleFacts, RunFacts
from pgle.evidence.xla_log import Evidence
from pgle.report import Report
from pgle.verdicts import auto_pgle as ap
from pgle.verdicts.origin import Origin, path_matcher
from pgle.verdicts.require import require_applied_line


def _facts(*mods: ModuleFacts) -> RunFacts:
    return RunFacts({m.module: m for m in mods}, observed=True)


def _err(t: float, module: str, holder: str | None = None,
         holder_thread: int | None = None) -> PgleSessionError:
    return PgleSessionError(t=t, module=module, thread=1, error="ALREADY_EXISTS",
                            holder_module=holder, holder_thread=holder_thread)


def _trace(t: float, call: str, site: str | None = None) -> ScriptTrace:
    return ScriptTrace(t=t, call=call, site=site)


OTHER = ("auto PGLE could not start its profiling session: another session held the profiler "
         "(ALREADY_EXISTS: Another profiling session active), not one pgle saw start (a profiler "
         "server, a library's own trace)")


def test_which_profiling_session_a_failure_collided_with(tmp_path):
    log = tmp_path / "log"
    # A failure before the script's trace started: not the script's.
    c = ap.profiler_collision(log, [_err(0.5, "jit_a")], [_trace(8.0, "start", "t.py:9")])
    assert (c.kind, c.modules, c.text) == ("other", frozenset({"jit_a"}),
                                           f"{OTHER}; 1 profiling session failed")
    assert c.fix == ("find what else starts the JAX profiler in the workload and keep it off "
                     "while auto PGLE profiles")
    # A failure at the instant the trace started, and a later one inside it: the script's.
    traces = [_trace(1.0, "start", "t.py:3"), _trace(3.0, "stop"), _trace(8.0, "start", "t.py:9")]
    assert ap.profiler_collision(log, [_err(8.0, "jit_a")], traces).text.startswith(
        "the workload runs its own profiler (jax.profiler.start_trace at t.py:9)")
    c = ap.profiler_collision(log, [_err(5.0, "jit_a"), _err(9.0, "jit_b")], traces)
    assert (c.kind, c.modules) == ("script", frozenset({"jit_a", "jit_b"}))
    assert "(2 profiling sessions failed)" in c.text
    # Only JAX's words in the log: the script's first start, no count.
    log.write_text("E ... ALREADY_EXISTS: Another profiling session active\n")
    c = ap.profiler_collision(log, [], [_trace(0.5, "stop"), _trace(1.0, "start", "t.py:3")])
    assert c.text == (
        "the workload runs its own profiler (jax.profiler.start_trace at t.py:3) while auto "
        "PGLE profiles; auto PGLE's profiling session collides with it (ALREADY_EXISTS: Another "
        f"profiling session active), so its executions were not profiled. Fix: {ap.SCRIPT_FIX}")
    assert ap.profiler_collision(log, [], []).text == OTHER


def test_threads_name_each_pair_of_modules(tmp_path):
    errors = [_err(1.0, "jit_a", "jit_b", 12), _err(2.0, "jit_a", "jit_c", 13)]
    c = ap.profiler_collision(tmp_path / "log", errors, [])
    assert c.text.endswith(f"; 2 profiling sessions failed, 2 pairs of modules. Fix: "
                           f"{ap.THREADS_FIX}")


def test_nsys_reasons_by_what_prewarm_recorded():
    manifest = {"modules": {
        # A miss on the key prewarm recorded as PGLE-optimized, or as plain: the entry left.
        "anew_pgle": {"pgle_optimized_keys": ["p1"]},
        "anew_plain": {"plain_keys": ["q1"]},
        # Prewarm wrote the PGLE entry; this run hit other keys than the plain ones.
        "fell_gone": {"status": "optimized", "first_pass_keys": [], "plain_keys": []},
        # A plain key hit, but prewarm did run it (first-pass keys): not the EXPECT_PGLE case.
        "fell_ran": {"status": "optimized", "first_pass_keys": ["f"], "plain_keys": ["k"]},
    }}
    facts = _facts(ModuleFacts("anew_pgle", misses=["p1"]), ModuleFacts("anew_plain", misses=["q1"]),
                   ModuleFacts("fell_gone", pgle_miss=True, hits=["h"]),
                   ModuleFacts("fell_ran", pgle_miss=True, hits=["k"]))
    rows = {r["module"]: r for r in ap.nsys_modules(facts, manifest)}
    gone = "prewarm's cache entry for it is gone (pruned or evicted); compiled anew"
    assert rows["anew_pgle"]["reason"] == rows["anew_plain"]["reason"] == gone
    wrote = ("prewarm wrote its PGLE-optimized entry, but it is gone (pruned or evicted) or its "
             "key changed; loaded the first-pass executable")
    assert rows["fell_gone"]["reason"] == rows["fell_ran"]["reason"] == wrote


def test_prewarm_rows_on_cpu_and_on_another_process():
    facts = _facts(ModuleFacts("jit_empty", profiled=2, empty_profiles=2),
                   ModuleFacts("jit_cached", hits=["k1"]),
                   ModuleFacts("jit_kept", profiled=2, fdo_lengths=[9], misses=["p"],
                               pgle_keys=["p"], not_written=["a reason", "another", "a reason"]))
    rows = {r["module"]: r for r in ap.prewarm_modules(facts, 2, "cpu", set(), {"k1"})}
    assert rows["jit_empty"]["reason"] == (
        "all 2 profiled executions gave an empty profile: the backend is cpu: the JAX profiler "
        "records no device kernels there, so every profile is empty (PGLE is an NVIDIA GPU "
        "feature)")
    assert rows["jit_kept"]["reason"] == ("recompiled with a profile but JAX did not keep it: "
                                          "a reason; another")
    # Process 1: its cache hit of a PGLE key is optimized; process 0 writes the entry.
    rows = {r["module"]: r for r in ap.prewarm_modules(facts, 2, "gpu", set(), {"k1"},
                                                       writer=False)}
    assert (rows["jit_cached"]["status"], rows["jit_cached"]["reason"]) == (
        "optimized", "loaded its PGLE-optimized executable from the compilation cache; process 0 "
        "writes its cache entry (JAX writes from process 0 only)")


def test_the_exit_codes_sentences():
    mods = [{"module": "jit_a", "status": "not_optimized"},
            {"module": "jit_b", "status": "empty_profile"}]
    rep = Report("auto", "not_optimized", modules=mods, reasons=["earlier reason"])
    assert ap.finish_code(rep, 0, "optimized", True, ()) == EXIT_NOT_VERIFIED
    assert rep.reasons == ["earlier reason", "jit_a is not_optimized", "jit_b is empty_profile"]
    assert rep.summary == ["not verified: jit_a is not_optimized; jit_b is empty_profile"]
    assert require_applied_line("partial", 0) == "--require-applied: status is partial, not applied"
    assert require_applied_line("applied", 2) == (
        "--require-applied: the coverage is unknown for 2 modules (this jax's WARN checker prints "
        "nothing); PGLE_STRICTNESS_LEVEL_ERROR proves it")


def test_reads_of_another_profile_are_each_said():
    origin = Origin(profile_match=path_matcher("/p/mine.pb"), profile_given="/p/mine.pb")
    # The reads a log showed, in order: the user's profile first.
    evidence = Evidence(reads=["/p/mine.pb", "fdo_profile", "/q/other.pb", "/q/other.pb"])
    assert origin.foreign_reads(evidence) == {
        "fdo_profile": "XLA used a profile JAX handed over itself (fdo_profile: auto PGLE is on, "
                       "and its profile wins over the flag), not /p/mine.pb: not counted; turn "
                       "JAX_ENABLE_PGLE off for a manual PGLE run.",
        "/q/other.pb": "XLA read /q/other.pb, which is not the profile pgle handed over "
                       "(/p/mine.pb) nor inside it: not counted.",
    }
