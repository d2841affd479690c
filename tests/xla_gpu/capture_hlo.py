#!/usr/bin/env python3
"""Compile one captured lane scenario again, with its flags and environment, and keep the
executed (optimized, scheduled) HLO text of each module: what a trace of the module names,
and what `pgle run` reads to tell an async collective XLA made synchronous after scheduling
from a missing one (pgle/verdicts/sync_converted.py).

    python tests/xla_gpu/capture_hlo.py --python ~/.cache/pgle-lane/venvs/jax-0.12.0.1/bin/python \
        --scenario dir-pbtxt --out tests/data/xla_gpu/0.12.0.1/hlo/dir-pbtxt [--module jit_prog_d_train]

XLA compiles deterministically: the run is accepted only when its log's module fingerprints
and the accuracy checker's missing names equal those of the captured log (so the HLO kept is
that of the compile the log shows). The scenario's profiles must be where its flags point
(the lane's work directory, /tmp/pgle-lane/<jax>/profiles: run lane.py for the version first).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lane

FP = re.compile(r"Fingerprint before LHS for module (jit_\S+?)\(\d+\) = (\w+)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(HERE), "data", "xla_gpu"))
    ap.add_argument("--module", action="append", help="keep only these modules' HLO")
    ns = ap.parse_args(argv)
    version = lane.probe_version(ns.python)["jax"]
    with open(os.path.join(ns.data, version, "scenarios.json")) as fh:
        doc = json.load(fh)
    sc = doc["scenarios"][ns.scenario]
    quirks = lane.Quirks.for_version(version)
    flags = [f for f in sc["xla_flags"].split() if f not in quirks.base_flags]
    wanted = {m["module"] for m in sc["modules"]}
    programs = ",".join(sorted({m["program"] for m in doc["modules"] if m["module"] in wanted}))
    with tempfile.TemporaryDirectory() as work:
        hlo = os.path.join(work, "hlo")
        run = lane.run_child(ns.python, flags, work=work, quirks=quirks, programs=programs,
                             env_extra=sc.get("env_set"), hlo_out=hlo)
        with open(os.path.join(ns.data, version, f"{ns.scenario}.log")) as fh:
            captured = fh.read()
        names = [ln.split("]", 1)[1] for ln in captured.splitlines() if "]   " in ln]
        again = [ln.split("]", 1)[1] for ln in lane.trim_log(run.stderr).splitlines()
                 if "]   " in ln]
        if sorted(set(FP.findall(captured))) != sorted(set(FP.findall(run.stderr))) \
                or names != again:
            print(f"capture_hlo: jax {version} {ns.scenario}: this compile is not the captured "
                  "one (fingerprints or missing names differ); nothing kept", file=sys.stderr)
            return 1
        os.makedirs(ns.out, exist_ok=True)
        for name in sorted(os.listdir(hlo)):
            if not ns.module or name[:-len(".txt")] in ns.module:
                shutil.copyfile(os.path.join(hlo, name), os.path.join(ns.out, name))
                print(f"capture_hlo: {os.path.join(ns.out, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
