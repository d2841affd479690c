#!/usr/bin/env python3
"""Capture issue 32's real-compiler cases for one jax version (deviceless H100 x8, the lane's
child and target config), into tests/data/xla_gpu/<jax>/issue32/:

- `<case>.log`: XLA's log (stderr), trimmed like every lane log (lane.trim_log);
- `hlo/<case>.txt`: the executed (optimized, scheduled) HLO of the case's module, where the
  compile succeeded (`compiled.as_text()`);
- `cases.json`: per case its intent, program, exact XLA_FLAGS, the profile's names and costs,
  and what happened (exit code, the compile's error, the missing names the checker listed).

    python tests/xla_gpu/capture_issue32.py --python ~/.cache/pgle-lane/venvs/jax-0.12.0.1/bin/python \
        --out tests/data/xla_gpu/0.12.0.1/issue32

Programs (tests/xla_gpu/compile_child.py): j, the shared demo's all-gather and small psum (jax
>= 0.11 compiles the psum as an async Triton collective fusion, fusion-start/-done); k, the
same with nothing to overlap the all-gather (XLA makes it synchronous after scheduling).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lane  # noqa: E402

MISSING = re.compile(r"\]   (\S+)\s*$")


def _entry(names: list[str], hlo: str) -> list[str]:
    """The entry computation's instruction names, in schedule order (what the checker walks
    for these loop-free programs)."""
    body = hlo.split("\nENTRY ", 1)[1].split("\n}", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\s*(?:ROOT\s+)?%?([\w.\-]+) = ", body, re.M)]


def cases(entry_j: list[str], entry_k: list[str]) -> list[dict]:
    comm = re.compile(r"^(all-|fusion-start|fusion-done|reduce-scatter|collective-permute)")
    compute_j = [n for n in entry_j if not comm.match(n)]
    # A third of the compute kept, every collective: "low coverage, no collective missing".
    low = [n for n in entry_j if comm.match(n)] + compute_j[::3]
    return [
        dict(name="triton-psum-good", program="j", checker=lane.CHECKER_WARN,
             intent="every entry name of program j (its psum is fusion-start/-done on jax >= "
                    "0.11): applied", names=entry_j),
        dict(name="triton-psum-missing", program="j", checker=lane.CHECKER_WARN,
             intent="program j without its psum (on jax >= 0.11 the Triton collective fusion "
                    "fusion-start/-done): never applied",
             names=[n for n in entry_j if not n.startswith(("fusion-", "all-reduce"))]),
        dict(name="low-coverage", program="j", checker=lane.CHECKER_WARN,
             intent="every collective of program j and a third of its compute: coverage far "
                    "below 0.9, no collective missing (the SoL rule's case, and an explicit "
                    "--min-coverage's)", names=low),
        dict(name="verifier-complete-error", program="k", checker=lane.CHECKER_ERROR,
             intent="program k's names plus the scheduled all-gather-start/-done under ERROR "
                    "strictness: the checker finds everything, then XLA's HLO verifier fails "
                    "the compile on jax >= 0.11 (the all-gather made synchronous is renamed)",
             names=entry_k + ["all-gather-start", "all-gather-done"]),
        dict(name="verifier-no-profile-error", program="k", checker=lane.CHECKER_ERROR,
             intent="ERROR strictness without any profile: the same verifier failure",
             names=None),
        dict(name="verifier-traceback", program="k", checker=lane.CHECKER_ERROR,
             intent="as verifier-complete-error, the compile error not caught: Python's own "
                    "traceback ends the process (what a user's log shows)",
             names=entry_k + ["all-gather-start", "all-gather-done"], raise_errors=True),
    ]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default=None)
    ns = ap.parse_args()
    info = lane.probe_version(ns.python)
    version = info["jax"]
    quirks = lane.Quirks.for_version(version)
    work = ns.work or f"/tmp/pgle-lane/{version}/issue32"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(f"{work}/profiles", exist_ok=True)
    entries = {}
    for prog in ("j", "k"):
        base = lane.run_child(ns.python, [lane.LHS_FLAG], work=f"{work}/base-{prog}",
                              quirks=quirks, programs=prog, hlo_out=f"{work}/base-{prog}/hlo")
        assert base.returncode == 0, base.stderr[-3000:]
        (mod,) = base.modules
        hlo = open(f"{work}/base-{prog}/hlo/{mod['module']}.txt").read()
        entries[prog] = _entry(lane._names_of(mod), hlo)
    os.makedirs(f"{ns.out}/hlo", exist_ok=True)
    doc = {"jax": version, "versions": info, "captured": time.strftime("%Y-%m-%d"),
           "target": "H100 SXM x8 (tests/xla_gpu/lane.py: H100_SXM_CONFIG), topology 1x1x8",
           "base_env": lane.BASE_ENV, "quirks_flags": quirks.base_flags,
           "entry_instructions": entries, "cases": {}}
    for case in cases(entries["j"], entries["k"]):
        flags = [lane.LHS_FLAG, case["checker"]]
        if case["names"] is not None:
            path = f"{work}/profiles/{case['name']}.pbtxt"
            with open(path, "w") as f:
                f.write(lane.profile_text([(n, lane.cost_of(n)) for n in case["names"]]))
            flags.insert(1, lane.PATH_FLAG + path)
        hlo_dir = f"{work}/{case['name']}/hlo"
        run = lane.run_child(ns.python, flags, work=f"{work}/{case['name']}", quirks=quirks,
                             programs=case["program"], hlo_out=hlo_dir,
                             raise_errors=case.get("raise_errors", False))
        with open(f"{ns.out}/{case['name']}.log", "w") as f:
            f.write(lane.trim_log(run.stderr))
        failed = [ln.split(": ", 1)[1] for ln in run.stderr.splitlines()
                  if ln.startswith("LANE-COMPILE-FAILED ")] or [
            ln for ln in run.stderr.splitlines() if ln.startswith("jax.errors.")]
        kept = None
        for fn in os.listdir(hlo_dir) if os.path.isdir(hlo_dir) else ():
            kept = f"hlo/{case['name']}.txt"
            shutil.copy(f"{hlo_dir}/{fn}", f"{ns.out}/{kept}")
        own = [ln for ln in run.stderr.splitlines() if "gpu_hlo_schedule.cc" in ln
               and "Fingerprint before LHS for module jit_" in ln]
        doc["cases"][case["name"]] = {
            "intent": case["intent"], "program": case["program"], "xla_flags": run.xla_flags,
            "profile": case["names"], "exit_code": run.returncode,
            "compile_failed": failed[0] if failed else None,
            "module_fingerprint_lines": own,
            "checker_missing_names": _own_missing(run.stderr),
            "hlo": kept,
        }
        print(case["name"], run.returncode, failed[:1], file=sys.stderr)
    with open(f"{ns.out}/cases.json", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return 0


def _own_missing(stderr: str) -> list[str]:
    """The missing names of the checker block after the workload module's `Found profile`
    (the autotuner candidates' blocks come before it)."""
    out: list[str] = []
    seen = False
    for ln in stderr.splitlines():
        if "Found profile for module jit_" in ln:
            seen, out = True, []
        elif seen and (m := MISSING.search(ln)) and "profile_guided_latency_estimator" in ln:
            out.append(m.group(1))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
