"""Issue 38: every message states one cause, the real one, once; no line contradicts another.

Real pgle on CPU (examples/train.py, a few steps), each run once per module (the fixture) and
read by several tests, so that the items cost little time."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.cheap_train import write_cheap_train
from helpers.pgle_testing import pgle_env, run_pgle
from pgle.commands import collect_job as job_profile
from pgle.commands.collect import CollectOptions
from pgle.jobs import layout
from pgle.jobs import ranks as jobrun
from pgle.jobs.layout import JobOptions, LayoutRequest, OutputRequest
from pgle.launch.workload import Workload
from pgle.profiles.files import Profile, load_profile_source, write_profile
from pgle.verdicts.across_ranks import JobReports

# A small model: compile time, not steps, is most of each run's cost (and the copy compiles at
# -O0: tests/helpers/cheap_train.py).
TRAIN = ["train.py", "--", "--steps", "3", "--devices", "2", "--dim", "16", "--vocab", "32",
         "--seq", "8"]


def lines(proc) -> list[str]:
    return [x for x in proc.stderr.decode().splitlines() if x.startswith("pgle:")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The CPU invocations the items below read (each runs once)."""
    d = tmp_path_factory.mktemp("recipes")
    write_cheap_train(d)
    (d / "p.pbtxt").write_text('costs { name: "fusion.1" cost_us: 12.5 }\n')
    (d / "run.sh").write_text('#!/bin/bash\npython3 -I -c "print(1)"\n')
    out = {"dir": d}
    out["require"] = run_pgle("run", "--profile", "p.pbtxt", "--require", "jit_train_step*",
                              "--run-dir", "r1", *TRAIN, cwd=d)
    out["command"] = run_pgle("run", "--profile", "p.pbtxt", "--", "bash", "run.sh", cwd=d)
    out["delay"] = run_pgle("collect", "--delay", "60", "--duration", "1", "-o", "d.pb",
                            *TRAIN, cwd=d)
    out["nokeep"] = run_pgle("collect", "--allow-empty", "--no-keep-trace", "-o", "e.pb",
                             *TRAIN, cwd=d)
    # -q and TF_CPP_MIN_LOG_LEVEL=3 in one run: each item reads its own lines of it.
    out["hidden"] = run_pgle("run", "-q", "--profile", "p.pbtxt", *TRAIN, cwd=d,
                             env=pgle_env(TF_CPP_MIN_LOG_LEVEL="3"))
    return out


def test_item1_require_without_require_applied(runs):
    proc = runs["require"]
    got = lines(proc)
    assert proc.returncode == 3, got
    assert not [x for x in got if "--require-applied" in x], got
    assert not [x for x in got if "no module matches" in x], got
    assert ("pgle: --require jit_train_step*: no module used a profile (verdict not_applicable)"
            in got)


def test_item2_command_mode_without_jax_says_so(runs):
    got = lines(runs["command"])
    assert any("no process of the command imported jax under pgle's harness" in x for x in got)
    assert not [x for x in got if "INFO log" in x], got


def test_item3_allow_empty_merge_writes_the_output(tmp_path):
    environ = {"PGLE_RANK": "0", "PGLE_WORLD_SIZE": "2", "PGLE_JOB_ID": "j38"}
    info = jobrun.detect(environ)
    jr = layout.resolve(LayoutRequest(output=OutputRequest(str(tmp_path / "merged.pb"))), info,
                        layout.job_dir(info, JobOptions(str(tmp_path / "job"))))
    reports = {}
    for rank in (0, 1):
        path = write_profile(Profile(), jr.job_dir / "profiles" / f"rank-{rank}.pb")
        reports[rank] = {"status": "empty", "exit_code": 1, "profile": {"path": str(path)},
                         "reasons": ["backend cpu: XLA records instruction timings only on "
                                     "NVIDIA GPUs"]}
    opts = CollectOptions(Workload(None, "m", ()), str(tmp_path / "merged.pb"), allow_empty=True)
    out = job_profile.combine(opts, jr, JobReports("collect", 2, reports))
    assert (out.status, out.exit_code) == ("empty", 0)
    assert load_profile_source(tmp_path / "merged.pb").is_empty()
    assert (tmp_path / "merged.pb.manifest.json").is_file()
    assert not [s for s in out.summary if "failed" in s], out.summary


def test_item4_a_delay_that_outlasts_the_run_is_the_cause(runs):
    proc = runs["delay"]
    got = lines(proc)
    assert proc.returncode == 1
    assert ("pgle: collect failed: no trace was written: the profiling window never opened: the "
            "run ended before --delay 60 s had passed (a shorter --delay, or a longer run)") in got
    assert not [x for x in got if "backend cpu" in x], got


def test_item5_store_recipe_creates_the_store_and_refreshes(tmp_path):
    write_cheap_train(tmp_path)
    for _ in range(2):  # the second refresh must not trip over the first one's profiles/
        proc = run_pgle("collect", "--per-module", "--store", "S", *TRAIN, cwd=tmp_path)
        assert proc.returncode == 1, lines(proc)  # CPU: an empty profile, as documented
        assert "pgle: store S: nothing added (collect status empty)" in lines(proc)
    assert (tmp_path / "S").is_dir() and not (tmp_path / "profiles").exists()
    proc = run_pgle("run", "--store", "S", *TRAIN, cwd=tmp_path)
    assert proc.returncode == 0, lines(proc)


def test_item6_verify_of_a_cpu_log_and_require_applied(runs, tmp_path):
    log = runs["dir"] / "r1" / "workload.log"
    proc = run_pgle("verify", str(log), cwd=tmp_path)
    (line,) = lines(proc)
    assert line.startswith("pgle: verdict: not_applicable: backend cpu")
    proc = run_pgle("verify", "-", "--require-applied", cwd=tmp_path, input=log.read_bytes())
    assert proc.returncode == 3
    assert "pgle: --require-applied: status is not_applicable, not applied" in lines(proc)
    # TF_CPP_MIN_LOG_LEVEL=3 on CPU: the backend is the cause, not an `error`.
    assert any(x.startswith("pgle: verdict: not_applicable: backend cpu")
               for x in lines(runs["hidden"])), lines(runs["hidden"])


def test_item9_empty_profiles_stay_the_cause_where_prewarm_said_so():
    from pgle.evidence import jax_log
    from pgle.verdicts.auto_pgle import STATUS_EMPTY_PROFILE, nsys_modules

    m = jax_log.ModuleFacts("jit_f")
    m.pgle_miss = True
    facts = jax_log.RunFacts({"jit_f": m}, observed=True)
    manifest = {"modules": {"jit_f": {"executions_seen": 2, "profiled_executions": 2,
                                      "empty_profiles": 2, "status": STATUS_EMPTY_PROFILE}}}
    (row,) = nsys_modules(facts, manifest)
    assert "all 2 executions prewarm profiled gave an empty profile" in row["reason"]


def test_item8_no_keep_trace_never_says_kept(runs):
    got = lines(runs["nokeep"])
    assert runs["nokeep"].returncode == 0, got
    assert not [x for x in got if "trace kept at" in x], got
    assert any("deleted the trace" in x and "--no-keep-trace" in x for x in got), got


def test_item9_nsys_refuses_a_typo_of_its_own_options(tmp_path):
    proc = run_pgle("nsys", "--cache-dir", str(tmp_path), "--rnaks", "0", "--", "x.py",
                    cwd=tmp_path)
    assert proc.returncode == 2
    assert lines(proc) == ["pgle: error: --rnaks is not a pgle nsys option; did you mean "
                           "--ranks? Options pgle does not know go to `nsys profile`; this one "
                           "looks like a typo of pgle's own."]


def test_item9_nsys_causes_from_the_manifest():
    from pgle.evidence import jax_log
    from pgle.verdicts.auto_pgle import nsys_modules

    facts = jax_log.RunFacts({}, observed=True)
    few = jax_log.ModuleFacts("jit_few")
    few.pgle_miss = True
    pruned = jax_log.ModuleFacts("jit_pruned")
    pruned.misses = ["k-opt"]
    facts.modules.update(jit_few=few, jit_pruned=pruned)
    manifest = {"modules": {
        "jit_few": {"executions_seen": 2, "profiled_executions": 2, "empty_profiles": 2,
                    "status": "not_optimized"},
        "jit_pruned": {"executions_seen": 4, "profiled_executions": 3, "empty_profiles": 0,
                       "status": "optimized", "pgle_optimized_keys": ["k-opt"]}}}
    rows = {r["module"]: r for r in nsys_modules(facts, manifest)}
    # Both facts: it ran too few times, and every profile it took was empty (the cause to
    # fix: more executions would give more empty profiles).
    assert "prewarm executed it 2 times, fewer than runs+1" in rows["jit_few"]["reason"]
    assert "all 2 executions prewarm profiled gave an empty profile" in rows["jit_few"]["reason"]
    assert rows["jit_few"]["fix"].startswith("prewarm on an NVIDIA GPU")
    assert rows["jit_pruned"]["reason"].startswith("prewarm's cache entry for it is gone")


def test_item11_python_callers_get_keywords_and_counts_agree(tmp_path):
    from pgle.errors import PgleError
    from pgle.phrases import all_of
    from pgle.units import human_bytes

    write_profile(Profile(costs=[("a", 1.0)]), tmp_path / "w.pb")
    with pytest.raises(PgleError) as e:
        write_profile(Profile(costs=[("a", 1.0)]), tmp_path / "w.pb")
    assert "force=True" in str(e.value) and "--force" not in str(e.value)
    assert "--force" in e.value.text(flags=True)
    assert all_of(1, "execution") == "the 1 execution" and all_of(2, "run") == "all 2 runs"
    assert human_bytes(27116) == "26.5 KiB"
    from pgle.analysis import html

    assert html._bytes(27116) == human_bytes(27116)


def test_quiet_drops_progress_but_not_the_verdict(runs):
    proc = runs["hidden"]
    got = lines(proc)
    assert proc.returncode == 0
    assert not [x for x in got if x.startswith("pgle: running:")], got
    assert any(x.startswith("pgle: verdict: not_applicable") for x in got), got


def test_old_option_names_still_work_with_a_notice(tmp_path):
    proc = run_pgle("store", "prune", str(tmp_path / "s"), "--keep", "2", cwd=tmp_path)
    assert "pgle: warning: --keep is deprecated: use --keep-last" in lines(proc)
    from pgle.cli.options import renamed_args

    assert renamed_args(["--keep-trace", "no", "t.py", "--", "--keep-trace", "no"]) == (
        ["--no-keep-trace", "t.py", "--", "--keep-trace", "no"],
        ["--keep-trace no is deprecated: use --no-keep-trace"])


# The contradictions issue 38 found, as patterns no pgle line may match.
CONTRADICTIONS = {
    "a plural after 1": re.compile(r"(?<![\d.])1 (instructions|executions|modules|entries|steps)\b"),
    "all of one": re.compile(r"\ball 1 "),
    "a bad plural": re.compile(r"directorys|entrys"),
    "a size rounded to nothing": re.compile(r"\b0\.0 [KMG]iB"),
    "--require-applied unasked": re.compile(r"--require-applied"),
    "kept, then nothing to keep": re.compile(r"keeping what it collected"),
    "the INFO log on a CPU run": re.compile(r"is the INFO log on"),
}


def test_no_line_contradicts_another(runs):
    for name in ("require", "command", "delay", "nokeep", "hidden"):
        got = lines(runs[name])
        for what, pattern in CONTRADICTIONS.items():
            bad = [x for x in got if pattern.search(x)]
            assert not bad, f"{name}: {what}: {bad}"
        joined = "\n".join(got)
        assert not ("trace kept at" in joined and "deleted the trace" in joined), name
        assert not ("never reached XLA" in joined and "collect changed" in joined), name
