"""An unsynced training loop under `pgle run` against the same loop run plainly (issue 33).

pgle times a step without markers by the completion of its outputs: a thread of the harness
waits on them while the loop runs on (no sync added; while the device keeps up, on one
execution about every millisecond, the time between shared among those in between). The loop
must run as fast under pgle as without it. The workload (tests/workloads/real/loop_timing.py
--form matmul: `x = step(x)` with a 4-matmul step, one sync at the end) times its own loop:
the figure is the per-pair ratio of those times (`own_ratio`), for steps of real work (256x256
matmuls, milliseconds each) and for tiny steps where the host's dispatch is the bottleneck
(16x16: tens of microseconds, where any per-call cost shows).

Both sides whole processes through the harness (benchmarks/harness.py): alternating pairs,
per-pair ratios. Writes benchmarks/results/bench_unsynced.json.
Runtime: ~3 minutes on 2 cores (development estimate).

    python benchmarks/bench_unsynced.py [--pairs 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

SCRIPT = str(h.ROOT / "tests" / "workloads" / "real" / "loop_timing.py")
CASES = (  # key, size, steps, what
    ("unsynced_loop", 256, 300, "a 300-step unsynced loop of 4 256x256 matmuls"),
    ("unsynced_tiny", 16, 30000, "a 30,000-step unsynced loop of 4 16x16 matmuls (dispatch-bound)"),
)


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap, default=5)
    args = ap.parse_args()
    rec = h.Recorder("bench_unsynced")
    env = h.python_env(PYTHONWARNINGS="ignore")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        from pgle.profiles.files import Profile, write_profile

        write_profile(Profile(costs=[("fusion.1", 1.0)]), tmp_path / "p.pb", force=True)
        for key, size, steps, what in CASES:
            own = {side: tmp_path / f"{key}-{side}.json" for side in ("plain", "pgle")}

            def own_time(path: Path, steps: int = steps) -> float:
                return json.loads(path.read_text())["median_s"] * steps

            loop = ["--form", "matmul", "--size", str(size), "--steps", str(steps), "--oracle"]
            plain = h.Side("python loop_timing.py",
                           [sys.executable, SCRIPT, *loop, str(own["plain"])], env=env, cwd=tmp,
                           own_time=lambda p=own["plain"]: own_time(p))
            folder = tmp_path / f"r-{key}"
            pgle = h.Side("pgle run", h.pgle_argv("run", "--profile", "p.pb", "--run-dir",
                                                  str(folder), SCRIPT, "--",
                                                  *loop, str(own["pgle"])),
                          env=env, cwd=tmp, own_time=lambda p=own["pgle"]: own_time(p),
                          before=lambda f=folder: shutil.rmtree(f, ignore_errors=True))
            res = h.compare(plain, pgle, pairs=args.pairs)
            rec.figure(f"{key}_program",
                       what=f"{what}: the loop's own time under `pgle run`",
                       anchor="the same loop's own time under `python w.py`", goal="<= 1.05×",
                       value=res["own_ratio"], met=res["own_ratio"]["median"] <= 1.05,
                       details=res)
    rec.write()


if __name__ == "__main__":
    main()
