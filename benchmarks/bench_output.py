"""Output pass-through: `pgle run ... | cat` against `python w.py | cat` (issues 12 and 16).

Three workloads: 200 MB printed in lines (what `PYTHONUNBUFFERED=1`, once forced on every
workload, made 3x slower), 100 MB without a newline, and 10 MB of tqdm-style `\\r` updates (one
flush per update). Whole processes through the harness (benchmarks/harness.py), a pipe to
`cat` on both sides, the same script on both.

The question of issue 16 is whether pgle makes the user's program slower, so the goal rows
compare the program's OWN run time (measured inside the program, from its first statement to
its last flush, written to a file) under `pgle run` and under plain python, from the same
alternating pairs as the whole-process rows. Whole-process wall time is shown too; it also
holds pgle's fixed cost (its start-up, the child-environment checks, the verdict's scan of the
log), which has its own goal (`pgle run` <= 0.3 s fixed, bench_overhead) and which a
whole-process ratio against a program of a few seconds would count a second time. The
launcher alone (`launcher.launch(...)` in `python -c`, with the child environment `pgle run`
builds: the pumps and the log, no harness, no verdict) is shown for the 200 MB workload.

On a terminal: the line-printing program (--term-mb) run under `script -q -c CMD /dev/null`
(util-linux: a real pseudo-terminal as the session's controlling terminal, as in a terminal
window) on both sides, so Python line-buffers it without pgle and pgle gives it a
pseudo-terminal of its own (pgle.launch.launcher). Skipped where `script` is missing. For
scale, the same program behind a second pseudo-terminal relayed by C code (`script` inside
`script`, `output_terminal_c_relay`): what a hop through a pseudo-terminal costs by itself.

With the cores busy (`output_busy_*`, issue 25): the line-printing program again, with one
busy-looping process per core running through every run of both sides, as on a node whose
other ranks or data loaders keep every core busy: what pgle's pump and log writer take is then
taken from the program.

Peak memory (`output_*_rss`): `pgle run`'s peak RSS (its own and the workload's, from wait4)
for the no-newline and `\\r` programs, whose single line is as long as their output: it stays
flat (docs/reliability.md states the bound).

The no-newline and `\\r` programs write as fast as memory copies; what they show is that the
pumps stay linear (issue 12). Their own run time is bound by how fast the consumer takes the
bytes, and pgle's consumer also writes every byte to the run log, so they carry no goal.
Writes benchmarks/results/bench_output.json.

    python benchmarks/bench_output.py [--pairs 5] [--lines-mb 200] [--mb 100] [--cr-mb 10]
        [--term-mb 20] [--busy-mb 100]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

# Every workload measures its own run time and writes it to the file named by argv[1].
OWN_START = "import sys, time\n_t0 = time.perf_counter()\n"
OWN_END = """
sys.stdout.flush()
with open(sys.argv[1], "w") as _f:
    _f.write(repr(time.perf_counter() - _t0))
"""
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
r = launcher.launch([sys.executable, sys.argv[2], sys.argv[4]], env, sys.argv[3])
sys.exit(r.exit_code)
"""


BURN = "while True: pass"


@contextlib.contextmanager
def busy_cores(count: int):
    """One busy-looping process per core, for as long as the block runs."""
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(count)]
    try:
        yield
    finally:
        for b in burners:
            b.kill()
            b.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    ap.add_argument("--lines-mb", type=int, default=200)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--cr-mb", type=int, default=10)
    ap.add_argument("--term-mb", type=int, default=20)
    ap.add_argument("--busy-mb", type=int, default=100)
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
            for stale in Path(d).glob("own-*.txt"):  # a run that fails to write its own is caught
                stale.unlink()

        for key, label, text, mb in (
            ("output_lines", "{} MB printed in lines", LINES, args.lines_mb),
            ("output_no_newline", "{} MB without a newline", NO_NEWLINE, args.mb),
            ("output_cr", "{} MB of `\\r` updates, flushed each", CARRIAGE_RETURNS, args.cr_mb),
            ("output_terminal", "{} MB printed in lines on a terminal", LINES, args.term_mb),
            ("output_busy", "{} MB printed in lines, every core busy", LINES, args.busy_mb),
        ):
            terminal = key == "output_terminal"
            busy = key == "output_busy"
            if terminal and not shutil.which("script"):
                print("no `script` (util-linux): the terminal rows are skipped", flush=True)
                continue
            script = Path(d) / f"{key}.py"
            script.write_text(OWN_START + text.format(mb=mb) + OWN_END)
            label = label.format(mb)
            own = {name: Path(d) / f"own-{name}.txt" for name in ("plain", "run", "launcher")}

            def reader(path: Path):
                return lambda: float(path.read_text())

            plain_cmd = f"'{sys.executable}' '{script}' '{own['plain']}'"
            run_cmd = " ".join(f"'{a}'" for a in h.pgle_argv("run", "--profile", "p.pb", "--run-dir",
                                                              str(run_dir), str(script), str(own["run"])))
            if terminal:
                plain_cmd, run_cmd = (f'script -q -e -c "{c}" /dev/null' for c in (plain_cmd, run_cmd))
                anchor = "`python w.py` on a terminal"
            else:
                plain_cmd, run_cmd = f"{plain_cmd} | cat", f"{run_cmd} 2>/dev/null | cat"
                anchor = "`python w.py | cat`"
            plain = h.Side(anchor, plain_cmd, shell=True, env=env, cwd=d, before=fresh,
                           own_time=reader(own["plain"]))
            pgle = h.Side("pgle run", run_cmd, shell=True, env=env, cwd=d, before=fresh,
                          own_time=reader(own["run"]))
            with busy_cores(os.cpu_count() or 1) if busy else contextlib.nullcontext():
                res = h.compare(plain, pgle, pairs=args.pairs)
            goal = key in ("output_lines", "output_terminal", "output_busy")
            rec.figure(f"{key}_program",
                       what=f"{label}: the program's own run time under `pgle run`",
                       anchor=f"the same program's own run time under {anchor}",
                       goal="<= 1.05×" if goal else "–", value=res["own_ratio"],
                       met=res["own_ratio"]["median"] <= 1.05 if goal else None, details=res)
            rec.figure(f"{key}_run", what=f"{label}: whole `pgle run` (start-up and verdict included)",
                       anchor=anchor, goal="–", value=res["ratio"], met=None, details=res)
            if key in ("output_no_newline", "output_cr"):
                rec.figure(f"{key}_rss", what=f"{label}: `pgle run`'s peak memory (one line "
                                              f"of {mb} MB)",
                           anchor="–", goal="flat (independent of the line's length)",
                           unit="MB", value=res["subject_rss_mb"], met=None, details=res)
            if terminal:
                # The same hop through a relay written in C: util-linux `script` inside
                # `script` (a second pseudo-terminal, read and written by a C loop). What any
                # relay between a program and its terminal costs, pgle or not.
                inner = f"script -q -e -c \\\"'{sys.executable}' '{script}' '{own['launcher']}'\\\" /dev/null"
                relay = h.Side("`script` inside `script`", f'script -q -e -c "{inner}" /dev/null',
                               shell=True, env=env, cwd=d, before=fresh,
                               own_time=reader(own["launcher"]))
                res = h.compare(plain, relay, pairs=args.pairs)
                rec.figure(f"{key}_c_relay",
                           what=f"{label}: the program's own run time behind a second "
                                "pseudo-terminal relayed in C (`script` inside `script`)",
                           anchor=f"the same program's own run time under {anchor}", goal="–",
                           value=res["own_ratio"], met=None, details=res)
            if key != "output_lines":
                continue
            launch = h.Side("launcher | cat",
                            f"'{sys.executable}' -c '{LAUNCHER}' '{h.ROOT}' '{script}' '{log}' "
                            f"'{own['launcher']}' | cat",
                            shell=True, env=env, cwd=d, before=fresh, own_time=reader(own["launcher"]))
            res = h.compare(plain, launch, pairs=args.pairs)
            rec.figure(f"{key}_launcher",
                       what=f"{label}: pgle's launcher and child environment (whole process)",
                       anchor="`python w.py | cat`", goal="–", value=res["ratio"], met=None,
                       details=res)
    rec.write()


if __name__ == "__main__":
    main()
