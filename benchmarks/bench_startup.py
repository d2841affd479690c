"""Start-up: `pgle --help`, every command's `--help`, and `inspect`/`diff`/`convert` on local
files, each against a bare `python -c pass` (same interpreter, same site-packages).

Goals (issue 16): `--help` <= 1.5x, `inspect`/`diff`/`convert` <= 2x. Whole processes,
alternating pairs (benchmarks/harness.py). Writes benchmarks/results/bench_startup.json.

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
    rec = h.Recorder("bench_startup")
    env = h.python_env()
    bare = h.Side("python -c pass", [sys.executable, "-c", "pass"], env=env)

    from cli.main import COMMANDS
    from pgle.profiles.files import Profile, write_profile

    def worst(sides: dict[str, list[str]], pairs: int) -> tuple[str, dict, dict]:
        results = {name: h.compare(bare, h.Side(name, argv, env=env), pairs=pairs)
                   for name, argv in sides.items()}
        name = max(results, key=lambda n: results[n]["ratio"]["median"])
        return name, results[name], {n: r["ratio"] for n, r in results.items()}

    top = h.compare(bare, h.Side("pgle --help", h.pgle_argv("--help"), env=env), pairs=args.pairs)
    rec.figure("startup_help", what="`pgle --help`", anchor="`python -c pass`", goal="<= 1.5×",
               value=top["ratio"], met=top["ratio"]["median"] <= 1.5, details=top)

    subs = {f"pgle {c} --help": h.pgle_argv(c, "--help") for c in sorted(COMMANDS)}
    name, res, every = worst(subs, h.MIN_PAIRS)
    rec.figure("startup_command_help", what=f"every command's `--help` (slowest: `{name}`)",
               anchor="`python -c pass`", goal="<= 1.5×", value=res["ratio"],
               met=res["ratio"]["median"] <= 1.5, details={"slowest": res, "all": every})

    with tempfile.TemporaryDirectory() as d:
        names = [f"fusion.{i}" for i in range(2000)]
        write_profile(Profile([(n, float(i)) for i, n in enumerate(names)]), Path(d) / "a.pbtxt")
        write_profile(Profile([(n, float(i) * 1.1) for i, n in enumerate(names)]), Path(d) / "b.pb")
        out = Path(d) / "c.pbtxt"

        def clean():
            out.unlink(missing_ok=True)

        for key, label, argv, before in (
            ("startup_inspect", "`pgle inspect a.pbtxt` (2,000 instructions)",
             h.pgle_argv("inspect", f"{d}/a.pbtxt"), None),
            ("startup_diff", "`pgle diff a.pbtxt b.pb`", h.pgle_argv("diff", f"{d}/a.pbtxt", f"{d}/b.pb"), None),
            ("startup_convert", "`pgle convert b.pb c.pbtxt`",
             h.pgle_argv("convert", f"{d}/b.pb", str(out)), clean),
        ):
            res = h.compare(bare, h.Side(label, argv, env=env, before=before), pairs=args.pairs)
            rec.figure(key, what=label, anchor="`python -c pass`", goal="<= 2×", value=res["ratio"],
                       met=res["ratio"]["median"] <= 2.0, details=res)
    rec.write()


if __name__ == "__main__":
    main()
