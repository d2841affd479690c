"""What a store records of where a profile came from (`--source`, collect's command) never holds
a secret: a shared store is read by every user of it (issue 37's independent mutants: the
source went into the metadata as given)."""

from __future__ import annotations

from helpers.pgle_testing import DATA, report_of, run_pgle

REFERENCE = DATA / "nsys" / "pgle_costs_reference"  # real per-module profiles (nsys-jax output)


def test_a_secret_in_the_source_never_reaches_the_store(tmp_path):
    store = tmp_path / "store"
    source = "python train.py --wandb-api-key=wk-s3cret https://bob:hunter2@data.example/x"
    proc = run_pgle("store", "add", str(store), str(REFERENCE), "--device-kind", "NVIDIA H100",
                    "--jax", "0.10.2", "--source", source, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    files = [p for p in store.rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" for p in files)
    for p in files:
        text = p.read_bytes()
        assert b"wk-s3cret" not in text and b"hunter2" not in text, p
    listed = report_of(run_pgle("store", "ls", str(store), "--json", cwd=tmp_path))
    sources = {e["source"] for m in listed["modules"] for e in m.get("entries", [m])}
    assert sources == {
        "python train.py --wandb-api-key=<redacted> https://bob:<redacted>@data.example/x"
    }, sources
