"""`pgle doctor` (no --probe) as a user runs it, against the one thing it cannot skip, whole processes.

`pgle doctor` asks a child process what jax sees (pgle never imports jax itself): that child,
`import jax; jax.devices()`, is the anchor here, run as `python -c` the way a user checks an
install by hand. pgle's side is the whole command: its start-up, that same child, the nsys and
ldconfig look-ups and the other checks, and the JSON report. The ratio is what the rest of
doctor costs on top of asking jax. The old script's goal, the command under 2 s, is kept as a
second row. Both through the harness (benchmarks/harness.py); neither side gets JAX/XLA
variables from the caller. Writes benchmarks/results/bench_doctor.json.
Runtime: ~2 minutes on 2 cores (development estimate).

    python benchmarks/bench_doctor.py [--pairs 7] [--workflow manual]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

GOAL_S = 2.0


def finished(code: int) -> None:
    if code not in (0, 1):  # 1: a check found an error (no GPU here), still a full run
        raise SystemExit(f"pgle doctor failed with exit status {code}")


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    ap.add_argument("--workflow", default="manual")
    args = ap.parse_args()
    rec = h.Recorder("bench_doctor")
    env = h.python_env(XLA_PYTHON_CLIENT_PREALLOCATE="false")  # as doctor's child gets it
    jax = h.Side("python -c 'import jax; jax.devices()'",
                 [sys.executable, "-c", "import jax; print(jax.devices())"], env=env)
    doctor = h.Side("pgle doctor", h.pgle_argv("doctor", "--json", "--workflow", args.workflow),
                    env=env, check=finished)
    res = h.compare(jax, doctor, pairs=args.pairs)
    rec.figure("doctor", what=f"`pgle doctor --workflow {args.workflow}` (no --probe)",
               anchor="`python -c 'import jax; jax.devices()'` (the child doctor runs)", goal="–",
               value=res["ratio"], met=None, details=res)
    rec.figure("doctor_seconds", what=f"`pgle doctor --workflow {args.workflow}` (whole process)",
               anchor="–", goal=f"< {GOAL_S:g} s", unit="s", value=res["subject_s"],
               met=res["subject_s"]["median"] < GOAL_S, details=res)
    rec.write()


if __name__ == "__main__":
    main()
