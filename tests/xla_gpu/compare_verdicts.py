#!/usr/bin/env python3
"""Run pgle's current `verify` over every captured lane fixture and set its verdict beside
what really happened (from scenarios.json, i.e. from XLA's full log, the exit status and the
schedules), so each mismatch is listed.

    python tests/xla_gpu/compare_verdicts.py [--data tests/data/xla_gpu] [--out FILE.md]

Stdlib only; runs `python -m cli.main verify --json LOG` from the repository root.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

sys.path.insert(0, HERE)
from truth import log_view, truth  # noqa: E402  (the same truth the fixture tests assert against)


def pgle_verify(log: str, extra: list[str], cwd: str | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-m", "cli.main", "verify", "--json", *extra, log],
                       capture_output=True, text=True, env=env, cwd=cwd or ROOT)
    try:
        rep = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"status": f"(no JSON, exit {p.returncode}: {p.stderr.strip()[-150:]})",
                "modules": [], "exit": p.returncode, "stderr": p.stderr}
    rep["exit"] = p.returncode
    rep["stderr"] = p.stderr
    return rep


def fmt_modules(rep: dict) -> str:
    out = []
    for m in rep.get("modules") or []:
        cov = m.get("coverage")
        cov = "-" if cov is None else f"{cov:.0%}"
        out.append(f"{m.get('module')}:{m.get('status')}:{cov}")
    return ", ".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(ROOT, "tests", "data", "xla_gpu"))
    ap.add_argument("--out")
    ns = ap.parse_args()
    lines = ["| jax | scenario | truth | truth per module | pgle status (exit) | pgle per module |",
             "|---|---|---|---|---|---|"]
    for v in sorted(os.listdir(ns.data), key=lambda s: [int(x) for x in s.split(".")]
                    if s[0].isdigit() else [999]):
        sj = os.path.join(ns.data, v, "scenarios.json")
        if not os.path.exists(sj):
            continue
        doc = json.load(open(sj))
        for name, sc in doc["scenarios"].items():
            log = os.path.join(ns.data, v, f"{name}.log")
            st, mods = truth(name, sc, doc)
            seen, _ = log_view(name, sc, doc)
            if seen != st:  # what a log alone can show (truth.log_view)
                st += f" (log shows: {seen})"
            extra = ["--jax", v]
            cwd = None
            if name == "relative-path":
                extra += ["--profile", "good.pbtxt"]
                cwd = sc["cwd"] if os.path.isdir(sc["cwd"]) else None
            rep = pgle_verify(log, extra, cwd)
            tm = ", ".join(f"{k}:{val}" for k, val in mods.items())
            lines.append(f"| {v} | {name} | {st} | {tm} | {rep.get('status')} ({rep['exit']}) "
                         f"| {fmt_modules(rep)} |")
    text = "\n".join(lines) + "\n"
    if ns.out:
        with open(ns.out, "w") as fh:
            fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
