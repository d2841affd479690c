"""`srun -n 2 pgle collect / tune` on the real one-node SLURM cluster.

Two JAX processes with gloo collectives profile the same step window for real; on CPU the
trace holds no device kernels, so the test-only helper tests/helpers/dist_collect_profile
(PYTHONPATH) hands each rank's pgle a small non-empty, rank-dependent profile in place of
jaxlib's empty conversion. Everything else (window, trace, job folder, merge) is real.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers.pgle_testing import TESTS, WORKLOADS, pgle_env, pythonpath, replay_env
from pgle.profiles.files import read_profile
from helpers.slurm_fixture import requires_slurm

pytestmark = requires_slurm

DIST = str(WORKLOADS / "dist_replay.py")
HELPER = str(TESTS / "helpers" / "dist_collect_profile")
PGLE = [sys.executable, "-m", "pgle"]


def _srun(cluster, args, project, **env):
    return cluster.srun([*PGLE, *args], ntasks=2, cwd=project,
                        env=replay_env(pgle_env(PYTHONPATH=pythonpath(HELPER), **env)), timeout=120)


def _job_dir(project: Path) -> Path:
    (jd,) = (project / ".pgle" / "jobs").iterdir()
    return jd


def test_every_rank_profiles_the_same_steps_and_rank_0_merges_them(slurm_cluster, project):
    proc = _srun(slurm_cluster, ["collect", "--json", "-o", "profile.pb", "--steps", "1:2", DIST],
                 project)
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = json.loads(proc.stdout)
    assert (job["command"], job["status"], job["mode"]) == ("collect", "collected", "merge")
    jd = _job_dir(project)
    # Each rank profiled steps 1..2 of its own process and wrote into the job folder.
    assert {r: (w["first_step"], w["steps"]) for r, w in job["windows"].items()} == \
        {"0": (1, 2), "1": (1, 2)}
    for rank in (0, 1):
        assert (jd / f"rank-{rank}" / "trace").is_dir()
        assert (jd / "profiles" / f"rank-{rank}.pb").is_file()
    # jaxlib's rule, percentile 90: of two values, the smaller (index int(0.9 * 1) = 0).
    merged = dict(read_profile(project / "profile.pb").costs)
    assert merged == {"fusion.0": 10.0, "all-reduce.1": 100.0, "fusion.2": 5.0}
    assert job["profile"]["path"] == str(project / "profile.pb")
    assert job["profile"]["merged_from"] == {str(r): str(jd / "profiles" / f"rank-{r}.pb")
                                             for r in (0, 1)}
    man = json.loads((project / "profile.pb.manifest.json").read_text())
    assert man["merge"]["ranks"] == [0, 1] and man["merge"]["percentile"] == 90
    assert man["profile"]["sha256"] == job["profile"]["sha256"]
    assert man["process_count"] == 2
    assert [r["status"] for r in job["rank_profiles"]] == ["collected", "collected"]
    lines = [x for x in proc.stderr.splitlines() if x.startswith("pgle:")]
    assert sum("rank 1 of 2: collected" in x for x in lines) == 1
    assert any(x.startswith("pgle: merged 2 rank profiles (ranks 0-1; percentile 90")
               for x in lines)


def test_an_empty_rank_is_named_and_the_others_merged(slurm_cluster, project):
    proc = _srun(slurm_cluster, ["collect", "--json", "-o", "profile.pb", DIST], project,
                 PGLE_TEST_EMPTY_RANKS="1")
    job = json.loads(proc.stdout)
    assert (job["status"], job["exit_code"]) == ("partial", 0)
    assert proc.returncode == 1  # rank 1's own collect failed: its profile is empty
    assert "rank 1 gave no profile; merged those of rank 0" in job["warnings"]
    assert any(r.startswith("rank 1: empty: backend cpu") for r in job["reasons"])
    assert dict(read_profile(project / "profile.pb").costs)["fusion.0"] == 10.0


def test_per_rank_outputs_and_a_rank_that_ran_another_program(slurm_cluster, project):
    proc = _srun(slurm_cluster, ["collect", "--json", "-o", "profiles/rank%r.pb", DIST], project,
                 PGLE_TEST_OTHER_PROGRAM_RANKS="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = json.loads(proc.stdout)
    assert (job["status"], job["mode"]) == ("collected", "per_rank")
    assert set(dict(read_profile(project / "profiles" / "rank0.pb").costs)) == \
        {"fusion.0", "all-reduce.1", "fusion.2"}
    assert "convolution.7" in dict(read_profile(project / "profiles" / "rank1.pb").costs)
    assert (project / "profiles" / "rank1.pb.manifest.json").is_file()
    assert not (project / "profile.pb").exists()  # no merge: -o named one file per rank
    assert any(w.startswith("rank 1's profile shares only 0% of its 3 instruction names")
               for w in job["warnings"])


def test_rank_0_alone_profiles_with_dash_dash_rank(slurm_cluster, project):
    proc = _srun(slurm_cluster, ["collect", "--json", "--rank", "0", "-o", "profile.pb", DIST],
                 project)
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = json.loads(proc.stdout)
    assert (job["status"], job["mode"]) == ("collected", "one_rank")
    assert job["profile"]["path"] == str(project / "profile.pb")
    assert [r["status"] for r in job["rank_profiles"]] == ["collected", "not_profiled"]
    jd = _job_dir(project)
    assert (jd / "rank-0" / "trace").is_dir()
    spec = json.loads((jd / "rank-1" / "spec.json").read_text())
    assert spec["profile"] is None  # rank 1 ran without the profiler
    assert "rank 1 of 2: not_profiled" in proc.stderr


def test_tune_merges_then_runs_every_rank_with_the_merged_profile(slurm_cluster, project):
    proc = _srun(slurm_cluster, ["tune", "--json", "--steps", "1:2", DIST, "--",
                                 "--partial-ranks", "1"], project)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sitecustomize" not in proc.stderr, proc.stderr[:3000]
    job = json.loads(proc.stdout)
    jd = _job_dir(project)
    assert job["command"] == "tune" and job["status"] == "partial", proc.stderr[-3000:]
    assert job["profile"]["path"] == str(jd / "collect" / "profile.pb")
    mods = {m["module"]: m for m in job["modules"]}
    assert mods["jit_train_step"]["ranks"] == {"applied": [0], "partial": [1]}
    # Both phases are jobs of their own; every rank read the merged profile in phase 2.
    for phase in ("collect", "run"):
        assert json.loads((jd / phase / "job.json").read_text())["job"]["reported"] == [0, 1]
    for rank in (0, 1):
        rep = json.loads((jd / "run" / f"rank-{rank}.json").read_text())
        assert rep["profile"]["path"] == str(jd / "collect" / "profile.pb")
    assert "tune: rank 1 of 2: partial" in proc.stderr


def test_sbatch_script_collects_per_rank_then_merges_as_one_process(slurm_cluster, project):
    # The shape of examples/slurm/collect.sbatch's alternative: per-rank files from an srun
    # step, then `pgle merge` in the batch script itself, which is one process (SLURM_PROCID=0
    # and SLURM_NTASKS=2 are set there too, but no step id), not rank 0 of 2.
    py = sys.executable
    script = project / "collect.sbatch"
    script.write_text(
        "#!/bin/bash\nset -euo pipefail\n"
        f"srun -n 2 {py} -m pgle collect -o 'profiles/rank%r.pb' '{DIST}'\n"
        f"{py} -m pgle merge profiles/rank0.pb profiles/rank1.pb -o profile.pb "
        "--report merge.json\n")
    out = project / "batch.out"
    result = slurm_cluster.sbatch(["-n", "2", "-t", "5", "-J", "pgle-test-collect", "-o", str(out),
                                   str(script)], cwd=project,
                                  env=pgle_env(PYTHONPATH=pythonpath(HELPER)), timeout=120)
    assert (result.state, result.exit_code) == ("COMPLETED", 0), out.read_text()[-3000:]
    assert dict(read_profile(project / "profile.pb").costs) == \
        {"fusion.0": 10.0, "all-reduce.1": 100.0, "fusion.2": 5.0}
    assert json.loads((project / "merge.json").read_text())["status"] == "ok"
