"""`pgle verify` on a job log written through `srun --label` (issue 37: ranks >= 10 losing their
rank survived every test): two ranks' real XLA:GPU lines (the lane's jax 0.10.2 captures),
interleaved line by line as srun writes them, rank 3 with a full profile and rank 12 with a
partial one. Each rank keeps its own verdict; rank 12 is not folded into rank 1 or into no rank."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from helpers.pgle_testing import run_pgle

LANE = Path(__file__).resolve().parents[1] / "data" / "xla_gpu" / "0.10.2"


def test_ranks_3_and_12_keep_their_own_verdicts(tmp_path):
    good = (LANE / "good-pb.log").read_text().splitlines()
    partial = (LANE / "partial-warn.log").read_text().splitlines()
    lines = []
    for a, b in itertools.zip_longest(good, partial):
        lines += [f"3: {a}"] if a is not None else []
        lines += [f"12: {b}"] if b is not None else []
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    proc = run_pgle("verify", str(log), "--json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert report["status"] == "partial", proc.stderr.decode()
    modules = {m["module"]: m["ranks"] for m in report["modules"]}
    assert modules["jit_prog_a_collectives"] == {"applied": [3], "partial": [12]}
    assert modules["jit_prog_b_cond"] == {"applied": [3], "not_applied": [12]}
    assert len(modules) == 5 and all(r["applied"] == [3] for r in modules.values())
    assert "(ranks 3, 12)" in proc.stderr.decode()
