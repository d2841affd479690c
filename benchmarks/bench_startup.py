"""Start-up: `pgle --help`, every command's `--help`, and `inspect`/`diff`/`convert` on local
files, each against a bare `python -c pass` of the same interpreter.

Both sides run in the venv of `harness.user_install` (pgle installed from a wheel, as users
install it): no editable-install import hook on either side (the anchor of issue 16 ran in the
editable development venv and paid pgle's own hook there, which flattered pgle; issue 25).
Start-up is not a goal (issue 24 retired the --help and inspect goals): the figures show where
it stands. Whole processes, alternating pairs (benchmarks/harness.py). Writes
benchmarks/results/bench_startup.json. Runtime: ~3 minutes on 2 cores.

    python benchmarks/bench_startup.py [--pairs 7]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    args = ap.parse_args()
    user = h.user_install()
    rec = h.Recorder("bench_startup")
    env = user.env()
    bare = h.Side("python -c pass", [user.python, "-c", "pass"], env=env, cwd=user.cwd)

    from cli.commands import COMMANDS
    from pgle.profiles.files import Profile, write_profile

    def worst(sides: dict[str, list[str]], pairs: int) -> tuple[str, dict, dict]:
        results = {name: h.compare(bare, h.Side(name, argv, env=env, cwd=user.cwd), pairs=pairs)
                   for name, argv in sides.items()}
        name = max(results, key=lambda n: results[n]["ratio"]["median"])
        return name, results[name], {n: r["ratio"] for n, r in results.items()}

    anchor = "`python -c pass` (the same venv)"
    top = h.compare(bare, h.Side("pgle --help", user.pgle_argv("--help"), env=env, cwd=user.cwd),
                    pairs=args.pairs)
    rec.figure("startup_help", what="`pgle --help`", anchor=anchor, goal="– (not a goal)",
               value=top["ratio"], met=None, details=top)

    subs = {f"pgle {c} --help": user.pgle_argv(c, "--help") for c in sorted(COMMANDS)}
    name, res, every = worst(subs, h.MIN_PAIRS)
    rec.figure("startup_command_help", what=f"every command's `--help` (slowest: `{name}`)",
               anchor=anchor, goal="– (not a goal)", value=res["ratio"], met=None,
               details={"slowest": res, "all": every})

    with tempfile.TemporaryDirectory() as d:
        names = [f"fusion.{i}" for i in range(2000)]
        write_profile(Profile([(n, float(i)) for i, n in enumerate(names)]), Path(d) / "a.pbtxt")
        write_profile(Profile([(n, float(i) * 1.1) for i, n in enumerate(names)]), Path(d) / "b.pb")
        out = Path(d) / "c.pbtxt"

        def clean():
            out.unlink(missing_ok=True)

        for key, label, argv, before in (
            ("startup_inspect", "`pgle inspect a.pbtxt` (2,000 instructions)",
             user.pgle_argv("inspect", f"{d}/a.pbtxt"), None),
            ("startup_diff", "`pgle diff a.pbtxt b.pb`", user.pgle_argv("diff", f"{d}/a.pbtxt", f"{d}/b.pb"), None),
            ("startup_convert", "`pgle convert b.pb c.pbtxt`",
             user.pgle_argv("convert", f"{d}/b.pb", str(out)), clean),
        ):
            res = h.compare(bare, h.Side(label, argv, env=env, cwd=user.cwd, before=before),
                            pairs=args.pairs)
            rec.figure(key, what=label, anchor=anchor, goal="– (not a goal)", value=res["ratio"],
                       met=None, details=res)
    rec.write()


if __name__ == "__main__":
    main()
