"""The trace `pgle collect` asks for against jax.profiler's defaults on the same window (issue 36):
its bytes and its export (`stop_trace`) time.

Both sides are whole `pgle collect` processes on the same workload and the same window (the
default: steps 2..6), alternating; they differ only in `--trace-detail`: `pgle` (no Python
tracer, host annotations only, HLO protos) against `full` (no options: jax.profiler's
defaults). The figures come from each run's report (`window.trace`): the xplane.pb files'
bytes and `stop_trace_seconds`, the harness's own timing of jax's stop_trace; per pair,
pgle / defaults. Two workloads, each 10 marked steps of a small jitted step on CPU:
- `python`: each step also makes 2,000 Python calls (a data pipeline's shape: what the
  Python tracer records);
- `jit`: the jitted step alone (what is left: XLA:CPU's host events at level 1 against 2).
On CPU the device activity is on host threads; on GPU the device tracer's events come on top
on both sides (pgle leaves the device tracer as it is). The bytes' goal holds for every pair;
the stop time's for the median: on CPU a stop takes milliseconds, where one descheduled
moment of a loaded machine moves a single pair's ratio.
Writes benchmarks/results/bench_trace.json. Runtime: ~4 minutes on 2 cores.

    python benchmarks/bench_trace.py [--pairs 7]
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

WORKLOAD = h.ROOT / "tests" / "workloads" / "py_heavy_steps.py"
STEPS = 10


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    args = ap.parse_args()
    rec = h.Recorder("bench_trace")
    env = h.python_env(JAX_PLATFORMS="cpu")
    with tempfile.TemporaryDirectory() as d:
        for kind, calls, what in (
            ("python", 2000, "steps with 2,000 Python calls each"),
            ("jit", 0, "steps of a jitted function only"),
        ):
            seen: dict[str, list[dict]] = {"pgle": [], "full": []}

            def side(detail: str, kind: str = kind, calls: int = calls, seen=seen) -> h.Side:
                run_dir = Path(d) / f"{kind}-{detail}"
                report = Path(d) / f"{kind}-{detail}.json"

                def fresh() -> None:
                    shutil.rmtree(run_dir, ignore_errors=True)
                    report.unlink(missing_ok=True)

                def read() -> float:
                    trace = json.loads(report.read_text())["window"]["trace"]
                    seen[detail].append(trace)
                    return float(trace["stop_trace_seconds"])

                argv = h.pgle_argv(
                    "collect", "--trace-detail", detail, "--run-dir", str(run_dir),
                    "--allow-empty", "-o", str(Path(d) / f"{kind}-{detail}.pb"), "--force",
                    "--report", str(report), "--", sys.executable, str(WORKLOAD), str(STEPS),
                    str(calls),
                )
                return h.Side(f"collect --trace-detail {detail}", argv, env=env, cwd=d,
                              before=fresh, own_time=read)

            res = h.compare(side("full"), side("pgle"), pairs=args.pairs)
            full, ours = seen["full"][1:], seen["pgle"][1:]  # after the warm-up of each side
            size = [o["bytes"] / f["bytes"] for f, o in zip(full, ours)]
            stop = [max(o["stop_trace_seconds"], 1e-6) / max(f["stop_trace_seconds"], 1e-6)
                    for f, o in zip(full, ours)]
            details = dict(
                res,
                steps=STEPS,
                python_calls_per_step=calls,
                pgle_bytes=h.spread([o["bytes"] for o in ours]),
                full_bytes=h.spread([f["bytes"] for f in full]),
                pgle_stop_s=h.spread([o["stop_trace_seconds"] for o in ours]),
                full_stop_s=h.spread([f["stop_trace_seconds"] for f in full]),
                method="per pair: pgle's trace / the defaults' trace, from each run's report "
                       "(window.trace.bytes, window.trace.stop_trace_seconds)",
            )
            rec.figure(f"trace_bytes_{kind}",
                       what=f"`pgle collect`'s trace bytes, {what}",
                       anchor="the same window with jax.profiler's defaults "
                              "(`--trace-detail full`)",
                       goal="< 1.0×", value=h.spread(size), met=max(size) < 1.0,
                       details=details)
            rec.figure(f"trace_stop_{kind}",
                       what=f"`pgle collect`'s stop_trace time, {what}",
                       anchor="the same window with jax.profiler's defaults "
                              "(`--trace-detail full`)",
                       goal="< 1.0×", value=h.spread(stop),
                       met=sorted(stop)[len(stop) // 2] < 1.0, details=details)
    rec.write()


if __name__ == "__main__":
    main()
