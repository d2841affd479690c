"""`pgle convert` of Nsight data: a real nsys-jax archive against nsys-jax's own pgle_costs output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers.pgle_testing import DATA, TESTS, pgle_env, report_of, run_pgle

ARCHIVE = DATA / "nsys" / "pax_fsdp4_4proc_proc0.trimmed.zip"
REFERENCE = DATA / "nsys" / "pgle_costs_reference"

pytest.importorskip("pyarrow")


def _pbtxt_costs(path: Path) -> list[tuple[str, float]]:
    from pgle.profiles.files import read_profile

    return list(read_profile(path).costs)


def _read_dir(d: Path) -> dict[str, list[tuple[str, float]]]:
    return {f.name[:-len(".pbtxt")]: _pbtxt_costs(f) for f in sorted(d.glob("*.pbtxt"))}


def _assert_matches_reference(mine: dict, ref: dict):
    assert sorted(mine) == sorted(ref)
    for fp, costs in ref.items():
        assert [n for n, _ in mine[fp]] == [n for n, _ in costs], fp
        for (name, a), (_, b) in zip(mine[fp], costs):
            # nsys-jax prints one decimal ("%.1f" of ms*1000); pgle keeps full precision.
            assert abs(a - b) <= 0.05 + 1e-9, (fp, name, a, b)


def test_archive_matches_nsys_jax_pgle_costs(tmp_path):
    out = tmp_path / "profiles"
    proc = run_pgle("convert", str(ARCHIVE), f"{out}/", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    report = report_of(proc)
    mine = _read_dir(out)
    ref = _read_dir(REFERENCE)
    _assert_matches_reference(mine, ref)
    assert sum(len(c) for c in mine.values()) == 2582
    step = next(m for m in report["modules"] if m["name"] == "pjit__wrapped_step_fn")
    # 5 executions; compiled while profiling (-1) and communication present (-1): 3 steady.
    assert (step["executions"], step["steady_executions"], step["status"]) == (5, 3, "written")
    autotune = [m for m in report["modules"] if m["status"].startswith("autotuning")]
    assert autotune and all(m["fingerprint"] is None for m in autotune)


def test_reference_regenerated_by_nsys_jax(tmp_path):
    """Run nsys-jax's own analysis now, on the same archive, and compare with pgle."""
    python = os.environ.get("PGLE_NSYS_JAX_PYTHON")
    if not python:
        if os.environ.get("PGLE_REQUIRE_NSYS_JAX") == "1":
            pytest.fail("PGLE_REQUIRE_NSYS_JAX=1 but PGLE_NSYS_JAX_PYTHON is not set")
        pytest.skip("set PGLE_NSYS_JAX_PYTHON to a Python >= 3.12 with nsys-jax, pandas, pyarrow, protoc")
    archive = tmp_path / "archive"
    with zipfile.ZipFile(ARCHIVE) as z:
        z.extractall(archive)
    env = dict(os.environ, PATH=f"{Path(python).parent}:{os.environ['PATH']}")
    proc = subprocess.run([python, str(TESTS / "helpers" / "nsys_jax_reference.py"), str(archive),
                           str(tmp_path / "ref")], env=env, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    fresh = _read_dir(tmp_path / "ref" / "maxcomm_mincompute")
    assert fresh == _read_dir(REFERENCE)
    out = tmp_path / "mine"
    assert run_pgle("convert", str(archive), f"{out}/", cwd=tmp_path).returncode == 0
    _assert_matches_reference(_read_dir(out), fresh)


def test_sqlite_export_gives_the_archive_costs(tmp_path):
    """A SQLite export (built from the archive's real ranges) projects to the same costs."""
    archive = tmp_path / "archive"
    with zipfile.ZipFile(ARCHIVE) as z:
        z.extractall(archive)
    db = tmp_path / "report.sqlite"
    subprocess.run([sys.executable, str(TESTS / "helpers" / "nsys_sqlite_from_archive.py"),
                    str(archive), str(db)], check=True, timeout=300)
    out = tmp_path / "from_sqlite"
    proc = run_pgle("convert", str(db), f"{out}/", "--dump", str(archive / "dump"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    _assert_matches_reference(_read_dir(out), _read_dir(REFERENCE))


def test_stat_and_skip_options(tmp_path):
    med = tmp_path / "median"
    assert run_pgle("convert", str(ARCHIVE), f"{med}/", "--stat", "median", cwd=tmp_path).returncode == 0
    ref = _read_dir(REFERENCE)
    mine = _read_dir(med)
    step = "25fa0b3e673a92036f22550cd7bcb068"
    comm = dict(ref[step])["all-gather-start.2"]
    assert dict(mine[step])["all-gather-start.2"] <= comm  # median of 3 <= their max
    one_file = tmp_path / "all.pbtxt"
    proc = run_pgle("convert", str(ARCHIVE), str(one_file), "--skip", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    names = [n for n, _ in _pbtxt_costs(one_file)]
    assert all("::" in n for n in names)  # one file: every name qualified by its module
    # --skip 0 keeps the warm-up executions, so modules run once get a profile too.
    assert len({n.split("::")[0] for n in names}) > len(ref)


@pytest.mark.parametrize("name, content, args, message", [
    ("missing.nsys-rep", None, [], "does not exist"),
    ("r.nsys-rep", b"x", [], "no `nsys` is on PATH"),
    ("e.sqlite", b"x", [], "Pass --dump DIR"),
    ("e.sqlite", b"not sqlite at all" * 10, ["--dump", str(DATA)], "holds no after-optimizations"),
    ("bad.zip", b"PK nope", [], "is not a zip file"),
])
def test_bad_inputs_one_line_exit_2(tmp_path, name, content, args, message):
    src = tmp_path / name
    if content is not None:
        src.write_bytes(content)
    env = pgle_env(PATH=os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                        if not (Path(p) / "nsys").exists()))
    proc = run_pgle("convert", str(src), f"{tmp_path / 'out'}/", *args, cwd=tmp_path, env=env)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert message in err and err.startswith("pgle: error:") and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_sqlite_without_nvtx_is_a_clear_error(tmp_path):
    import sqlite3

    db = tmp_path / "plain.sqlite"
    sqlite3.connect(db).execute("CREATE TABLE StringIds (id INTEGER, value TEXT)").connection.commit()
    dump = tmp_path / "dump"
    with zipfile.ZipFile(ARCHIVE) as z:
        for n in z.namelist():
            if n.startswith("dump/"):
                z.extract(n, tmp_path)
    proc = run_pgle("convert", str(db), f"{tmp_path / 'out'}/", "--dump", str(dump), cwd=tmp_path)
    assert proc.returncode == 2
    assert "no NVTX_EVENTS table" in proc.stderr.decode()


def test_existing_output_is_not_overwritten(tmp_path):
    out = tmp_path / "profiles"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    proc = run_pgle("convert", str(ARCHIVE), f"{out}/", cwd=tmp_path)
    assert proc.returncode == 2 and "--force" in proc.stderr.decode()
    assert (out / "keep.txt").read_text() == "mine"
