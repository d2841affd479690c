"""`srun -n 2 pgle auto / prewarm / nsys` on the real one-node SLURM cluster.

Two JAX processes with gloo collectives run JAX's real auto PGLE and persistent cache. The
test-only helper tests/helpers/pgle_cpu_profile hands JAX a non-empty profile on rank 0 only:
on CPU, JAX's cache keys differ between processes (the CPU topology fingerprint is
process-local), so with a profile on every rank JAX's FDO-profile sharing would wait forever
(see tests/workloads/dist_auto.py). A module optimized on rank 0 only is exactly the case the
job verdict must name: `partial`, with the ranks.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from helpers.pgle_testing import TESTS, WORKLOADS, pgle_env, pythonpath
from helpers.slurm_fixture import requires_slurm

pytestmark = requires_slurm

DIST = str(WORKLOADS / "dist_auto.py")
HELPER = str(TESTS / "helpers" / "pgle_cpu_profile")
FAKE_NSYS_DIR = str(TESTS / "helpers" / "fake_nsys")


def _srun(cluster, args, project, *, profile_on_rank_0_only=True, **env):
    pgle = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "pgle", *args])
    script = ('if [ "$SLURM_PROCID" != 0 ]; then export PGLE_TEST_CPU_PROFILE=0; fi; exec '
              if profile_on_rank_0_only else "exec ") + pgle
    return cluster.srun(["bash", "-c", script], ntasks=2, cwd=project,
                        env=pgle_env(PYTHONPATH=pythonpath(HELPER), **env), timeout=120)


def _mods(job: dict) -> dict:
    return {m["module"]: m for m in job["modules"]}


def test_auto_names_the_ranks_where_a_module_was_optimized(slurm_cluster, project):
    proc = _srun(slurm_cluster, ["auto", "--json", "--runs", "2", "--percentile", "100",
                                 "--require", "jit_f", DIST, "--", "--f", "3", "--g", "1",
                                 "--h", "0"], project)
    job = json.loads(proc.stdout)
    assert (job["command"], job["status"]) == ("auto", "partial")
    f = _mods(job)["jit_f"]
    assert f["status"] == "partial"
    assert f["ranks"]["optimized"] == [0] and list(f["ranks"]) == ["optimized", "empty_profile"]
    assert job["exit_code"] == 3 and proc.returncode == 3  # --require jit_f: not on every rank
    assert any("jit_f is partial" in r for r in job["reasons"])


def test_prewarm_only_rank_0_writes_then_nsys_on_chosen_ranks(slurm_cluster, project, tmp_path):
    cache = project / "jax cache"
    proc = _srun(slurm_cluster, ["prewarm", "--json", "--cache-dir", str(cache), "--runs", "2",
                                 "--percentile", "100", DIST, "--", "--f", "3", "--g", "1",
                                 "--h", "0"], project)
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = json.loads(proc.stdout)
    f = _mods(job)["jit_f"]
    assert (f["status"], f["ranks"]) == ("partial", {"optimized": [0], "not_optimized": [1]})
    assert job["cache_dir"] == str(cache)
    ranks = {r["rank"]: r for r in job["ranks"]}
    assert set(ranks) == {0, 1}
    rank1 = json.loads(Path(ranks[1]["report"]).read_text())
    assert rank1["cache_writer"] is False and json.loads(
        Path(ranks[0]["report"]).read_text())["cache_writer"] is True
    # Only process 0 writes the cache, and only rank 0 records the run in the manifest.
    man = json.loads((cache / "pgle-manifest.json").read_text())
    assert len(man["runs"]) == 1 and man["runs"][0]["state"] == "finished"
    assert man["environment"]["process_count"] == 2
    assert man["modules"]["jit_f"]["status"] == "optimized"
    keys = [p.name for p in cache.iterdir() if p.name.startswith("jit_f-")]
    assert len(keys) == 2  # rank 0's first-pass and PGLE-optimized entries; none from rank 1

    calls = tmp_path / "nsys-calls.jsonl"
    path = f"{FAKE_NSYS_DIR}{os.pathsep}{os.environ.get('PATH', '')}"
    proc = _srun(slurm_cluster, ["nsys", "--json", "--cache-dir", str(cache), "--ranks", "1",
                                 "-o", "rep-%r", "--", DIST, "--f", "3", "--g", "1", "--h", "0"],
                 project, profile_on_rank_0_only=False, FAKE_NSYS_LOG=str(calls), PATH=path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = json.loads(proc.stdout)
    (call,) = [json.loads(x) for x in calls.read_text().splitlines()]  # rank 1 alone under nsys
    assert call["env"]["JAX_COMPILATION_CACHE_EXPECT_PGLE"] == "true"
    assert call["options"][:2] == ["-o", "rep-1"]  # %r filled in per rank
    assert job["nsys_reports"] == {"1": os.path.abspath(project / "rep-1.nsys-rep")}
    f = _mods(job)["jit_f"]
    assert f["ranks"]["loaded_optimized"] == [0]  # rank 0 loaded what it prewarmed
    assert job["status"] == "partial"
    assert f"Nsight Systems reports: rank 1: {project / 'rep-1.nsys-rep'}" in proc.stderr
