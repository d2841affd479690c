"""Rank 0 gathering the reports of 512 ranks from the job folder, whole processes.

The job folder holds what 512 ranks of a `pgle run` job leave (start, exit and report files;
about 200 per-module entries per report). pgle's side is `python -c` running
`pgle.jobs.folder.gather` over it (a listing, then each `rank-<r>.json` read and parsed); the
anchor is a `python -c` doing the least any gather must, by hand: read and `json.loads` the
512 report files by name. The ratio is what gather's listing, checks and bookkeeping cost on
top. Through the harness (benchmarks/harness.py): alternating pairs, per-pair ratios of time
and peak RSS. Writes benchmarks/results/bench_gather.json.

What the old script also printed is gone, on purpose: gather's latency while reports arrive
is its poll interval (a design constant, 50 ms growing to 500 ms), not a speed; and the cost of
`peer_failure`'s poll on a local temporary folder says nothing about the shared filesystems
(NFS, Lustre) where it matters; `--dir` still puts the job folder on one of those.
Runtime: ~1 minute on 2 cores (development estimate).

    python benchmarks/bench_gather.py [--ranks 512] [--modules 200] [--pairs 7] [--dir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import harness as h  # noqa: E402

from pgle.jobs import folder as job  # noqa: E402
from pgle.jobs.ranks import RankInfo  # noqa: E402


def fake_report(rank: int, modules: int) -> dict:
    """About what a rank's `pgle run` report holds: per-module verdicts, step times."""
    return {
        "command": "run",
        "status": "ok",
        "exit_code": 0,
        "workload_exit_code": 0,
        "rank": rank,
        "profile": {"path": "/shared/profiles/profile-3f2a.pb", "costs": 18234, "sha256": "ab" * 32},
        "log_path": f"/shared/.pgle/runs/20260101-000000-run/rank{rank}.log",
        "modules": [
            {"module": f"jit_train_step_{m}", "fingerprint": f"{m:032x}", "status": "applied",
             "found": 1200 + m, "missing": 0, "missing_names": []}
            for m in range(modules)
        ],
        "step_times": {"median_s": 0.1234, "p90_s": 0.1301, "steps": list(range(30))},
        "reasons": [], "warnings": [], "summary": [f"rank {rank}: {modules} modules applied"],
    }


def info(rank: int, world: int) -> RankInfo:
    return RankInfo(rank=rank, world_size=world, local_rank=rank % 8, node_id=rank // 8,
                    job_id="123456", step_id="0", source="slurm")


def write_ranks(job_dir: str, world: int, modules: int) -> None:
    for rank in range(world):
        job.mark_started(job_dir, info(rank, world))
        job.mark_exit(job_dir, rank, 0)
        job.write_report(job_dir, rank, fake_report(rank, modules))


GATHER = """
import sys
from pgle.jobs import folder
reports, missing = folder.gather(sys.argv[1], int(sys.argv[2]), timeout_s=60)
assert not missing and len(reports) == int(sys.argv[2])
"""
BY_HAND = """
import json, os, sys
reports = {}
for rank in range(int(sys.argv[2])):
    with open(os.path.join(sys.argv[1], f"rank-{rank}.json"), "rb") as f:
        reports[rank] = json.loads(f.read())
assert len(reports) == int(sys.argv[2])
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    h.pairs_arg(parser)
    parser.add_argument("--ranks", type=int, default=512)
    parser.add_argument("--modules", type=int, default=200, help="per-module entries in each report")
    parser.add_argument("--dir", default=None, help="folder for the job folder (default: a temp folder)")
    args = parser.parse_args()
    rec = h.Recorder("bench_gather")
    env = h.python_env()
    base = Path(tempfile.mkdtemp(prefix="pgle-bench-gather-", dir=args.dir))
    try:
        folder = base / "job"
        write_ranks(str(folder), args.ranks, args.modules)
        if not job.report_path(folder, 0).exists():
            raise SystemExit(f"no rank-0 report where the anchor reads it: {job.report_path(folder, 0)}")
        mb = sum(p.stat().st_size for p in folder.rglob("rank-*.json")) / 1e6
        res = h.compare(h.Side("json.loads of each report", [sys.executable, "-c", BY_HAND, str(folder),
                                                              str(args.ranks)], env=env),
                        h.Side("pgle gather", [sys.executable, "-c", GATHER, str(folder), str(args.ranks)],
                               env=env), pairs=args.pairs)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rec.figure("gather", what=f"rank 0 gathering {args.ranks} reports ({mb:.0f} MB of JSON, "
                              f"{args.modules} modules each; whole process)",
               anchor="`python -c` reading and `json.loads`-ing each report by hand", goal="–",
               value=res["ratio"], met=None, details=dict(res, reports_mb=round(mb, 1)))
    rec.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
