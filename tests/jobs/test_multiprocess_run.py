"""`srun -n 2 pgle run ...` on the real one-node SLURM cluster: two JAX processes with gloo
collectives, each replaying XLA:GPU's PGLE lines for its own rank; rank 0 prints the job verdict.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from helpers.pgle_testing import (WORKLOADS, pgle_env, replay_env, report_of, run_pgle,
                                  write_profile)
from helpers.slurm_fixture import requires_slurm

pytestmark = requires_slurm

DIST = WORKLOADS / "dist_replay.py"
PGLE = [sys.executable, "-m", "pgle"]


def _srun(cluster, args, project, *, env=None, timeout=120, srun_args=()):
    return cluster.srun([*PGLE, *args], ntasks=2, cwd=project, env=replay_env(pgle_env(**(env or {}))),
                        timeout=timeout, srun_args=srun_args)


def _job_dir(project: Path) -> Path:
    (jd,) = (project / ".pgle" / "jobs").iterdir()
    return jd


def _pgle_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("pgle:")]


def test_job_verdict_names_the_rank_where_a_module_applied_only_partly(slurm_cluster, project):
    write_profile(project / "p.pb", {"fusion.1": 1.0, "all-reduce.2": 5.0})
    proc = _srun(slurm_cluster, ["run", "--json", "--require-applied", "--report", "rep-%r.json",
                                 "--profile", "p.pb", str(DIST), "--", "--partial-ranks", "1"],
                 project)
    # Rank 0's own modules all applied, but the job's verdict is partial: --require-applied
    # fails the job (3); rank 1 fails its own verdict too.
    assert proc.returncode == 3, proc.stderr[-3000:]
    job = json.loads(proc.stdout)  # only rank 0 prints JSON; every workload's stdout went to stderr
    assert (job["command"], job["status"], job["exit_code"]) == ("run", "partial", 3)
    mods = {m["module"]: m for m in job["modules"]}
    train, ev = mods["jit_train_step"], mods["jit_eval_step"]
    assert train["status"] == "partial"
    assert train["ranks"] == {"applied": [0], "partial": [1]}
    assert train["coverage"] == 0.25 and train["instructions_missing"] == 15
    assert "applied on rank 0; partial on rank 1" in train["ranks_summary"]
    assert (ev["status"], ev["ranks"], ev["absent_ranks"]) == ("applied", {"applied": [0, 1]}, [])
    assert any("jit_train_step: applied on rank 0; partial on rank 1" in r for r in job["reasons"])
    jd = _job_dir(project)
    assert job["job"]["dir"] == str(jd) and job["job"]["reported"] == [0, 1]
    assert job["job"]["missing"] == [] and job["job"]["world_size"] == 2
    assert [r["status"] for r in job["ranks"]] == ["applied", "partial"]
    assert json.loads((jd / "job.json").read_text()) == job
    # Per-rank run folders and reports in the job folder.
    for rank in (0, 1):
        assert (jd / f"rank-{rank}" / "workload.log").is_file()
        rep = json.loads((jd / f"rank-{rank}.json").read_text())
        assert rep["rank"]["rank"] == rank and rep["run_dir"] == str(jd / f"rank-{rank}")
    # --report with %r: rank 0 writes the job report, rank 1 its own full report.
    assert json.loads((project / "rep-0.json").read_text()) == job
    rank1 = json.loads((project / "rep-1.json").read_text())
    assert (rank1["status"], rank1["exit_code"]) == ("partial", 3)
    assert rank1["modules"][0]["missing_instructions"][:2] == ["fusion.0", "fusion.1"]
    # Rank 0 says everything; rank 1 one line.
    lines = _pgle_lines(proc.stderr)
    assert sum(line.startswith("pgle: running:") for line in lines) == 1
    (rank_line,) = [line for line in lines if "rank 1 of 2" in line]
    assert "partial" in rank_line and "exit 3" in rank_line and "rank-1.json" in rank_line
    assert any(line.startswith("pgle: job verdict: partial") for line in lines)
    assert "pgle:   jit_train_step: partial (applied on rank 0; partial on rank 1" in proc.stderr
    assert proc.stderr.count("dist_replay: rank") == 2  # the workloads' stdout, unchanged


def test_a_crashed_rank_makes_every_rank_exit_promptly_with_its_code(slurm_cluster, project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    start = time.monotonic()
    proc = _srun(slurm_cluster, ["run", "--json", "--profile", "p.pb", str(DIST), "--",
                                 "--crash-rank", "1", "--crash-code", "7"], project, timeout=90)
    elapsed = time.monotonic() - start
    # Without the watchdog rank 0 hangs in gloo / the shutdown barrier for ~100 s.
    assert elapsed < 30, elapsed
    assert proc.returncode == 7, proc.stderr[-3000:]
    for task in (0, 1):  # every rank's pgle exits with the crashed workload's code
        assert f"task {task}: Exited with exit code 7" in proc.stderr, proc.stderr[-2000:]
    job = json.loads(proc.stdout)
    assert (job["exit_code"], job["workload_exit_code"]) == (7, 7)
    assert any("rank 1 failed first, with exit code 7; pgle stopped the workload on rank 0" in r
               for r in job["reasons"])
    ranks = {r["rank"]: r for r in job["ranks"]}
    assert ranks[0]["stopped_for"] == {"rank": 1, "exit_code": 7}
    assert ranks[1]["stopped_for"] is None and ranks[1]["workload_exit_code"] == 7


def test_a_rank_that_never_reports_is_listed_after_the_gather_timeout(slurm_cluster, project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    # Rank 1's workload SIGKILLs its pgle (as the OOM killer would): no exit, no report.
    proc = _srun(slurm_cluster, ["run", "--json", "--gather-timeout", "2", "--profile", "p.pb",
                                 str(DIST), "--", "--orphan-rank", "1"], project)
    job = json.loads(proc.stdout)
    assert job["exit_code"] == 1  # pgle could not gather every rank's evidence
    assert job["status"] == "applied"  # over the ranks that did report
    (missing,) = job["job"]["missing"]
    assert missing["rank"] == 1 and "its workload has not exited" in missing["why"]
    assert job["job"]["reported"] == [0]
    assert any("rank 1 never reported within --gather-timeout 2 s" in r for r in job["reasons"])
    assert "pgle: rank 1 never reported: started on" in proc.stderr


def test_verify_of_an_srun_label_log_aggregates_per_module_across_ranks(slurm_cluster, project):
    profile = write_profile(project / "p.pb", {"fusion.1": 1.0})
    # Quoted: the path has a space, and XLA (tsl parse_flags_from_env) splits flags on spaces.
    # TF_CPP_MIN_LOG_LEVEL=0: the user turned XLA's INFO log on (the replay, like XLA, hides
    # its INFO lines otherwise).
    env = replay_env(pgle_env(XLA_FLAGS=f'--xla_gpu_pgle_profile_file_or_directory_path="{profile}"',
                              TF_CPP_MIN_LOG_LEVEL="0"))
    proc = slurm_cluster.srun([sys.executable, str(DIST), "--partial-ranks", "0"], ntasks=2,
                              srun_args=["--label"], cwd=project, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = project / "job.log"
    log.write_text(proc.stdout + proc.stderr)
    # jax 0.9.2: no SoL fallback, so --min-coverage judges the 15 missing fusions (issue 22).
    verified = run_pgle("verify", "--json", "--jax", "0.9.2", "--profile", str(profile), str(log),
                        cwd=project)
    rep = report_of(verified)
    assert verified.returncode == 0 and rep["status"] == "partial"
    mods = {m["module"]: m for m in rep["modules"]}
    assert mods["jit_train_step"]["ranks"] == {"partial": [0], "applied": [1]}
    assert mods["jit_eval_step"]["ranks"] == {"applied": [0, 1]}
    assert rep["ranks"] == [{"rank": 0, "status": "partial"}, {"rank": 1, "status": "applied"}]
    assert "jit_train_step: partial (partial on rank 0 (coverage 25%, 15 missing); applied on " \
           "rank 1)" in verified.stderr.decode()


def test_bad_input_on_one_rank_stops_the_job_at_once(slurm_cluster, project):
    write_profile(project / "p.pb", {"fusion.1": 1.0})
    # --log without %r would have both ranks write one file: refused before launching.
    proc = _srun(slurm_cluster, ["run", "--log", "run.log", "--profile", "p.pb", str(DIST)],
                 project, timeout=60)
    assert proc.returncode == 2
    assert "pgle: error: rank 0: --log run.log has no rank placeholder" in proc.stderr
    assert "run-%r.log" in proc.stderr
    jd = _job_dir(project)
    assert sorted(p.name for p in (jd / "failed").iterdir()) == ["rank-0", "rank-1"]
