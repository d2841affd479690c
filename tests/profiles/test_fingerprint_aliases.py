"""Per-module profiles that survive per-rank fingerprints (issue 10, deliverable 4).

A real 4-process A100 run gave one rank a different fingerprint for the same module (identical
pre-optimisation HLO and names; per-rank autotuning picked other GEMM configs). XLA looks up
`<fp>.pbtxt` by the fingerprint of the module it compiles, so a directory keyed by rank 0's
fingerprints misses on that rank. `pgle merge` (and collect's rank merge, which shares the code)
writes the merged profile under every fingerprint the module was seen under, and says which
fingerprints are aliases; `pgle inspect` shows them. Inputs here are real per-module directories
with the manifest.json `pgle collect --per-module` writes (module rows: name, fingerprint).
"""
from __future__ import annotations

import json

from helpers.pgle_testing import report_of, run_pgle

FP0, FP1, FE = "a" * 32, "b" * 32, "e" * 32


def rank_dir(path, train_fp, costs):
    path.mkdir()
    (path / f"{train_fp}.pbtxt").write_text(
        "".join(f'costs {{ name: "{n}" cost_us: {c} }}\n' for n, c in costs))
    (path / f"{FE}.pbtxt").write_text('costs { name: "fusion.9" cost_us: 3.0 }\n')
    (path / "manifest.json").write_text(json.dumps({"modules": [
        {"module": "jit_train(5)", "name": "jit_train", "fingerprint": train_fp,
         "file": f"{train_fp}.pbtxt"},
        {"module": "jit_eval(9)", "name": "jit_eval", "fingerprint": FE, "file": f"{FE}.pbtxt"},
    ]}))
    return path


def test_merge_writes_the_profile_under_every_fingerprint_of_a_module(tmp_path):
    r0 = rank_dir(tmp_path / "rank-0", FP0, [("fusion.1", 10.0), ("all-gather-start", 100.0)])
    r1 = rank_dir(tmp_path / "rank-1", FP1, [("fusion.1", 30.0), ("all-gather-start", 300.0)])
    out = tmp_path / "merged"
    proc = run_pgle("merge", "--json", "--method", "max", "-o", str(out), str(r0), str(r1),
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    assert report["fingerprint_aliases"] == {"jit_train(5)": [FP0, FP1]}
    assert any("module jit_train(5) has 2 fingerprints" in s for s in report["summary"])
    # Both ranks find their file, and each holds the merge over both ranks' profiles.
    for fp in (FP0, FP1):
        text = (out / f"{fp}.pbtxt").read_text()
        assert 'name: "all-gather-start"' in text and "300" in text, text
    # Not "in 1 of 2 inputs": the aliases count as one module.
    assert not any("1 of 2 inputs" in w for w in report["warnings"]), report["warnings"]

    proc = run_pgle("inspect", "--json", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    inspected = report_of(proc)
    assert inspected["inspect"]["fingerprint_aliases"] == {"jit_train(5)": [FP0, FP1]}
    assert f"fingerprints {FP0}, {FP1} are aliases of one module (jit_train(5))" in \
        inspected["summary"]


def test_no_aliases_when_every_rank_agrees(tmp_path):
    r0 = rank_dir(tmp_path / "rank-0", FP0, [("fusion.1", 10.0)])
    r1 = rank_dir(tmp_path / "rank-1", FP0, [("fusion.1", 30.0)])
    proc = run_pgle("merge", "--json", "-o", str(tmp_path / "m"), str(r0), str(r1), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    assert report["fingerprint_aliases"] == {}
    assert sorted(p.name for p in (tmp_path / "m").iterdir() if p.suffix == ".pbtxt") == \
        sorted([f"{FP0}.pbtxt", f"{FE}.pbtxt"])
