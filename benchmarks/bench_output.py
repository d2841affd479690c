"""Output pass-through: `pgle run ... | cat` against `python w.py | cat` (issues 12 and 16).

Three workloads: 200 MB printed in lines (what `PYTHONUNBUFFERED=1`, once forced on every
workload, made 3x slower), 100 MB without a newline, and 10 MB of tqdm-style `\\r` updates (one
flush per update). Whole processes through the harness (benchmarks/harness.py), a pipe to
`cat` on both sides. Two pgle sides per workload:
- `pgle run --profile p.pb w.py | cat`: everything the user pays, including pgle's start-up and
  the verdict's scan of the log the workload wrote;
- pgle's launcher alone (`launcher.launch(...)` in `python -c`: the pumps and the log, with
  the child environment `pgle run` builds): the cost of moving the bytes and of the
  environment pgle gives the workload.
Writes benchmarks/results/bench_output.json.

    python benchmarks/bench_output.py [--pairs 5] [--lines-mb 200] [--mb 100] [--cr-mb 10]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

LINES = """
import sys
line = "step {{:8d}}  loss 5.8112  grad-norm 0.9931  tokens/s 182734.2  lr 3.0e-04\\n"
total, i = 0, 0
while total < {mb} << 20:
    s = line.format(i)
    print(s, end="")
    total += len(s)
    i += 1
"""
NO_NEWLINE = """
import sys
chunk = b"x" * (1 << 20)
for _ in range({mb}):
    sys.stdout.buffer.write(chunk)
sys.stdout.buffer.flush()
"""
CARRIAGE_RETURNS = """
import sys
total = {mb} << 20
bar = 0
i = 0
while bar < total:
    line = f"\\r{{i:9d}} it [" + "#" * (i % 40) + " " * (40 - i % 40) + "]"
    sys.stdout.write(line)
    sys.stdout.flush()  # tqdm flushes every update
    bar += len(line)
    i += 1
sys.stdout.write("\\n")
"""
# The launcher with the environment `pgle run` gives the workload (pgle.launch.childenv).
LAUNCHER = """
import sys
sys.path.insert(0, sys.argv[1])
from pgle.launch import childenv, launcher
env = childenv.build(info_log=True).env
r = launcher.launch([sys.executable, sys.argv[2]], env, sys.argv[3])
sys.exit(r.exit_code)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    ap.add_argument("--lines-mb", type=int, default=200)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--cr-mb", type=int, default=10)
    args = ap.parse_args()
    rec = h.Recorder("bench_output")
    from pgle.profiles.files import Profile, write_profile

    env = h.python_env(JAX_PLATFORMS="cpu")  # no PYTHONUNBUFFERED: the program decides
    with tempfile.TemporaryDirectory() as d:
        write_profile(Profile(costs=[("fusion.1", 1.0)]), Path(d) / "p.pb")
        run_dir, log = Path(d) / "run", Path(d) / "launcher.log"

        def fresh():
            shutil.rmtree(run_dir, ignore_errors=True)
            log.unlink(missing_ok=True)

        for key, label, text, mb in (
            ("output_lines", "200 MB printed in lines", LINES, args.lines_mb),
            ("output_no_newline", "100 MB without a newline", NO_NEWLINE, args.mb),
            ("output_cr", "10 MB of `\\r` updates, flushed each", CARRIAGE_RETURNS, args.cr_mb),
        ):
            script = Path(d) / f"{key}.py"
            script.write_text(text.format(mb=mb))
            label = label.replace("200 MB", f"{args.lines_mb} MB").replace("100 MB", f"{args.mb} MB") \
                .replace("10 MB", f"{args.cr_mb} MB")
            plain = h.Side("python w.py | cat", f"'{sys.executable}' '{script}' | cat", shell=True,
                           env=env, cwd=d)
            run = " ".join(f"'{a}'" for a in h.pgle_argv("run", "--profile", "p.pb", "--run-dir",
                                                          str(run_dir), str(script)))
            pgle = h.Side("pgle run | cat", f"{run} 2>/dev/null | cat", shell=True, env=env, cwd=d,
                          before=fresh)
            launch = h.Side("launcher | cat",
                            f"'{sys.executable}' -c '{LAUNCHER}' '{h.ROOT}' '{script}' '{log}' | cat",
                            shell=True, env=env, cwd=d, before=fresh)
            res = h.compare(plain, launch, pairs=args.pairs)
            # The program's own speed is at stake only where it runs long enough to measure it:
            # printing in lines. The other two finish in a fraction of pgle's start-up; their
            # rows show that the pumps stay linear (issue 12), with no ratio goal.
            goal = "<= 1.1×" if key == "output_lines" else "–"
            rec.figure(f"{key}_launcher", what=f"{label}: pgle's launcher and child environment",
                       anchor="`python w.py | cat`", goal=goal, value=res["ratio"],
                       met=res["ratio"]["median"] <= 1.1 if key == "output_lines" else None,
                       details=res)
            res = h.compare(plain, pgle, pairs=args.pairs)
            rec.figure(f"{key}_run", what=f"{label}: whole `pgle run` (start-up and verdict included)",
                       anchor="`python w.py | cat`", goal="–", value=res["ratio"], met=None,
                       details=res)
    rec.write()


if __name__ == "__main__":
    main()
