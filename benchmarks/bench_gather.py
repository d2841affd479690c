"""Benchmark: rank 0 gathering the reports of 512 simulated ranks from the filesystem.

    python benchmarks/bench_gather.py [--ranks 512] [--modules 200] [--dir /shared/tmp]

Three measurements, printed:
1. gather() of reports already on disk: time and peak Python memory
   (tracemalloc) plus the process's peak RSS growth.
2. gather() while writer processes produce the ranks' start/exit/report files
   over about a second (the realistic case): how long after the last report
   gather() returns.
3. peer_failure(), which every rank polls twice a second: its cost in a job
   folder holding every rank's files, with no failure and with one.

--dir puts the job folder on a given filesystem (e.g. NFS or Lustre, where
the numbers that matter are); the default is a temporary folder.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def write_ranks(job_dir: str, ranks: list[int], world: int, modules: int, spread_s: float) -> None:
    t0 = time.monotonic()
    for i, rank in enumerate(ranks):
        # Ranks finish spread over `spread_s`, as real ones do.
        target = t0 + spread_s * i / max(1, len(ranks))
        time.sleep(max(0.0, target - time.monotonic()))
        job.mark_started(job_dir, info(rank, world))
        job.mark_exit(job_dir, rank, 0)
        job.write_report(job_dir, rank, fake_report(rank, modules))


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=512)
    parser.add_argument("--modules", type=int, default=200, help="per-module entries in each report")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--dir", default=None, help="folder for the job folders (default: a temp folder)")
    args = parser.parse_args()
    world = args.ranks
    base = Path(tempfile.mkdtemp(prefix="pgle-bench-gather-", dir=args.dir))
    try:
        # 1. everything already on disk
        cold = base / "cold"
        write_ranks(str(cold), list(range(world)), world, args.modules, 0.0)
        size = sum(p.stat().st_size for p in cold.glob("rank-*.json"))
        rss0 = rss_mib()
        t0 = time.perf_counter()
        reports, missing = job.gather(cold, world, timeout_s=60)
        seconds = time.perf_counter() - t0
        rss_growth = rss_mib() - rss0
        assert not missing and len(reports) == world
        del reports
        # Memory on a second pass: tracemalloc slows the first one down several times.
        tracemalloc.start()
        reports, missing = job.gather(cold, world, timeout_s=60)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"gather, all {world} reports on disk ({size / 2**20:.1f} MiB of JSON, "
              f"{args.modules} modules each): {seconds * 1000:.0f} ms, "
              f"peak Python memory {peak / 2**20:.1f} MiB (tracemalloc), peak RSS growth {rss_growth:.1f} MiB")
        del reports

        # 2. reports arriving while rank 0 gathers
        live = base / "live"
        ctx = multiprocessing.get_context("spawn")
        chunks = [list(range(world))[i::args.writers] for i in range(args.writers)]
        writers = [ctx.Process(target=write_ranks, args=(str(live), c, world, args.modules, 1.0)) for c in chunks]
        for w in writers:
            w.start()
        t0 = time.perf_counter()
        reports, missing = job.gather(live, world, timeout_s=120)
        done = time.time()
        seconds = time.perf_counter() - t0
        for w in writers:
            w.join()
        assert not missing and len(reports) == world
        last = max(job.report_path(live, r).stat().st_mtime for r in range(world))
        print(f"gather while {args.writers} writer processes produce {world} ranks over ~1 s: "
              f"{seconds:.2f} s in all, returned {max(0.0, done - last) * 1000:.0f} ms after the last report")
        del reports

        # 3. the watchdog's poll
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            assert job.peer_failure(cold, 0) is None
        healthy = (time.perf_counter() - t0) / n
        job.mark_exit(cold, world - 1, 3)
        t0 = time.perf_counter()
        for _ in range(n):
            assert job.peer_failure(cold, 0) == (world - 1, 3)
        failed = (time.perf_counter() - t0) / n
        print(f"peer_failure in a folder of {3 * world} rank files: {healthy * 1e6:.0f} us per poll "
              f"with no failure, {failed * 1e6:.0f} us with one "
              f"({world} ranks x 2 polls/s = {2 * world} polls/s on the shared filesystem)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
