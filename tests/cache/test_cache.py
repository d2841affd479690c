"""`pgle cache ls|stats|prune` and the cache manifest, on real files and real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.pgle_testing import pgle_env, pgle_lines, report_of, run_pgle
from pgle.cache import entries
from pgle.commands import cache
from pgle.cache import manifest as cache_manifest
from pgle.errors import BadInput, PgleError
from pgle import units

H = "0123456789abcdef" * 4  # 64 hex


def key(module: str, n: int) -> str:
    return f"{module}-{H[:-2]}{n:02x}"


def make_cache(d: Path, entries: dict[str, int], *, atime: bool = False, age: float = 0.0) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for k, size in entries.items():
        p = d / f"{k}-cache"
        p.write_bytes(b"x" * size)
        if age:
            t = time.time() - age
            os.utime(p, (t, t))
        if atime:
            stamp = int((time.time() - age) * 1e9)
            (d / f"{k}-atime").write_bytes(stamp.to_bytes(8, "little"))


def write_manifest(d: Path, modules: dict, runs: list | None = None) -> None:
    data = cache_manifest.empty()
    data["modules"] = modules
    data["runs"] = runs or []
    (d / cache_manifest.MANIFEST_NAME).write_text(json.dumps(data))


@pytest.fixture
def cdir(tmp_path: Path) -> Path:
    d = tmp_path / "jax cache ü"
    make_cache(d, {key("jit_step", 1): 100, key("jit_step", 2): 200, key("jit_init", 3): 50,
                   key("jit_my-fn", 4): 10})
    write_manifest(d, {"jit_step": {"first_pass_keys": [key("jit_step", 1)],
                                    "pgle_optimized_keys": [key("jit_step", 2)], "plain_keys": []}})
    # Things prune must never touch.
    (d / ".lockfile").write_text("")
    (d / "xla_gpu_per_fusion_autotune_cache_dir").mkdir()
    (d / "notes-cache.txt").write_text("mine")
    (d / "jit_x-short-cache").write_text("not an entry: no 64-hex key")
    return d


def test_ls_roles_sizes_and_totals(cdir: Path):
    report = cache.ls(str(cdir)).to_dict()
    roles = {e["key"]: e["role"] for e in report["entries"]}
    assert roles == {key("jit_step", 1): "first_pass", key("jit_step", 2): "pgle_optimized",
                     key("jit_init", 3): "unknown", key("jit_my-fn", 4): "unknown"}
    by_module = {m["module"]: m for m in report["modules"]}
    assert by_module["jit_step"]["bytes"] == 300 and by_module["jit_step"]["entries"] == 2
    assert by_module["jit_step"]["status"] == "pgle_optimized"
    assert by_module["jit_my-fn"]["entries"] == 1  # module names may hold '-'
    assert report["total"] == {"entries": 4, "bytes": 360, "modules": 3}


def test_cli_ls_table_and_json(cdir: Path, tmp_path: Path):
    proc = run_pgle("cache", "ls", str(cdir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.decode()
    assert "PGLE-optimized" in out and "first-pass" in out and key("jit_step", 2) in out
    proc = run_pgle("cache", "ls", str(cdir), "--module", "jit_s*", "--json", cwd=tmp_path)
    rep = report_of(proc)
    assert rep["command"] == "cache ls" and rep["exit_code"] == 0
    assert [m["module"] for m in rep["modules"]] == ["jit_step"]


def test_prune_dry_run_by_default_then_yes(cdir: Path, tmp_path: Path):
    before = sorted(os.listdir(cdir))
    proc = run_pgle("cache", "prune", str(cdir), "--module", "jit_step", "--json", cwd=tmp_path)
    rep = report_of(proc)
    assert proc.returncode == 0 and rep["dry_run"] is True
    assert sorted(e["key"] for e in rep["selected"]) == [key("jit_step", 1), key("jit_step", 2)]
    assert sorted(os.listdir(cdir)) == before  # nothing deleted
    proc = run_pgle("cache", "prune", str(cdir), "--module", "jit_step", "--yes", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    left = set(os.listdir(cdir))
    assert left == set(before) - {f"{key('jit_step', 1)}-cache", f"{key('jit_step', 2)}-cache"}
    # The manifest and everything that is not an entry stay.
    assert {cache_manifest.MANIFEST_NAME, ".lockfile", "notes-cache.txt", "jit_x-short-cache",
            "xla_gpu_per_fusion_autotune_cache_dir"} <= left


def test_prune_by_age_uses_lru_access_stamp(tmp_path: Path):
    d = tmp_path / "c"
    make_cache(d, {key("jit_old", 1): 10}, atime=True, age=10 * 86400)
    make_cache(d, {key("jit_new", 2): 10}, atime=True, age=3600)
    # Written long ago, but JAX's LRU stamp says it was used an hour ago: keep it.
    make_cache(d, {key("jit_used", 3): 10}, atime=False, age=10 * 86400)
    (d / f"{key('jit_used', 3)}-atime").write_bytes(int((time.time() - 3600) * 1e9).to_bytes(8, "little"))
    rep = cache.prune(str(d), older_than=units.parse_duration("7d"), yes=True).to_dict()
    assert rep["deleted"] == [key("jit_old", 1)]
    names = set(os.listdir(d))
    assert f"{key('jit_old', 1)}-cache" not in names and f"{key('jit_old', 1)}-atime" not in names
    assert f"{key('jit_new', 2)}-atime" in names and f"{key('jit_used', 3)}-cache" in names


def test_prune_needs_a_criterion_and_a_valid_duration(cdir: Path, tmp_path: Path):
    proc = run_pgle("cache", "prune", str(cdir), cwd=tmp_path)
    assert proc.returncode == 2 and "needs --older-than" in proc.stderr.decode()
    proc = run_pgle("cache", "prune", str(cdir), "--older-than", "7 days", cwd=tmp_path)
    assert proc.returncode == 2
    assert pgle_lines(proc) == ["pgle: error: --older-than '7 days' is not a duration. Use a number "
                                "with a unit: 30m, 12h, 7d, 2w (or combined, 1d12h)."]
    assert units.parse_duration("1d12h") == 36 * 3600 and units.parse_duration("90m") == 5400


def test_prune_refuses_while_a_prewarm_runs(cdir: Path):
    run = cache_manifest.new_run("train.py", None)  # this test process: alive
    write_manifest(cdir, {}, runs=[run])
    dry = cache.prune(str(cdir), modules=("jit_init",)).to_dict()
    assert dry["warnings"] and len(dry["selected"]) == 1
    with pytest.raises(PgleError, match="is writing to"):
        cache.prune(str(cdir), modules=("jit_init",), yes=True)
    dead = dict(run, pid=2 ** 22 + 12345)  # no such process: a crashed prewarm does not block
    write_manifest(cdir, {}, runs=[dead])
    assert cache.prune(str(cdir), modules=("jit_init",), yes=True).to_dict()["deleted"]


def test_corrupt_manifest_is_one_clear_error(cdir: Path, tmp_path: Path):
    (cdir / cache_manifest.MANIFEST_NAME).write_text('{"format": 1, "modules": {')
    proc = run_pgle("cache", "ls", str(cdir), cwd=tmp_path)
    assert proc.returncode == 2
    lines = pgle_lines(proc)
    assert len(lines) == 1 and "is corrupt" in lines[0] and "Traceback" not in proc.stderr.decode()
    (cdir / cache_manifest.MANIFEST_NAME).write_text('{"format": 1}')
    with pytest.raises(BadInput, match="not a pgle manifest"):
        cache.ls(str(cdir))


FOREIGN = [
    ([{"state": "in_progress", "host": "other", "started": "x"}], None,
     "run 1 has a start time that is no number"),
    ([{"state": "in_progress", "host": "other", "started": [1]}], None,
     "run 1 has a start time that is no number"),
    ([{"state": "in_progress", "host": "other", "started": float("nan")}], None,
     "run 1 has a start time that is no number"),
    ([{"id": "ok"}, "in_progress"], None, "run 2 is no object"),
    ([{"state": "in_progress", "host": "evil\x1b[2J", "started": 1.0}], None,
     "run 1 has a host that is no printable name"),
    ([], {"jit_step": ["k"]}, "module 'jit_step' is no record of cache keys"),
    ([], {"jit_step": {"plain_keys": "abc"}}, "module 'jit_step' is no record of cache keys"),
    # A bool is an int to Python, never a time; a long name is shown to its first 80 characters.
    ([{"state": "in_progress", "host": "other", "started": True}], None,
     "run 1 has a start time that is no number"),
    ([], {"m" * 81 + "z": {"plain_keys": [1]}}, f"module {'m' * 80!r} is no record of cache keys"),
]
FIX = ("Move it away (or delete it) and run `pgle prewarm` again; the cache entries "
       "themselves are fine.")


def _foreign(runs, modules) -> str:
    data = cache_manifest.empty()
    data["runs"], data["modules"] = runs, modules or {}
    return json.dumps(data)


@pytest.mark.parametrize("runs, modules, says", FOREIGN)
def test_a_manifest_record_no_pgle_writes_is_refused_in_one_sentence(runs, modules, says):
    with pytest.raises(BadInput) as e:
        cache_manifest.parse(_foreign(runs, modules), "/c/m.json")
    assert e.value.message == f"cache manifest /c/m.json is not a pgle manifest ({says})."
    assert e.value.hint == FIX


def test_a_manifest_another_process_wrote_stops_prune_with_one_line(cdir, tmp_path):
    """The cache folder is shared: its manifest is untrusted. A record no pgle writes (a
    run's start time "x" crashed `cache prune` with a ValueError traceback) is one line, exit
    2, and prune deletes nothing."""
    (cdir / cache_manifest.MANIFEST_NAME).write_text(_foreign(*FOREIGN[0][:2]))
    before = sorted(p.name for p in cdir.iterdir())
    proc = run_pgle("cache", "prune", str(cdir), "--older-than", "0m", "--yes", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr.decode()
    assert pgle_lines(proc) == [f"pgle: error: cache manifest {cdir / cache_manifest.MANIFEST_NAME} "
                                f"is not a pgle manifest ({FOREIGN[0][2]}). {FIX}"]
    assert "Traceback" not in proc.stderr.decode()
    assert sorted(p.name for p in cdir.iterdir()) == before


def test_a_pgle_written_run_record_still_reads():
    """What pgle writes passes: a run from new_run (its start a float) and an old record
    without a start time or a host."""
    data = cache_manifest.empty()
    data["runs"] = [cache_manifest.new_run("train.py", None), {"id": "old", "state": "done"}]
    data["modules"] = {"jit_step": {"first_pass_keys": [], "plain_keys": ["k"]}}
    assert cache_manifest.parse(json.dumps(data)) == data


def test_missing_and_unwritable_dirs(tmp_path: Path):
    proc = run_pgle("cache", "ls", str(tmp_path / "nope"), cwd=tmp_path)
    assert proc.returncode == 2 and "does not exist" in proc.stderr.decode()
    with pytest.raises(BadInput, match="cannot"):
        entries.check_writable_dir("/proc/pgle-cache", create=True)  # unwritable even for root
    with pytest.raises(BadInput, match="cannot prune"):
        cache.prune("/proc/self", modules=("x",), yes=True)


def test_stats_flags_pgle_entries_gone(cdir: Path):
    os.unlink(cdir / f"{key('jit_step', 2)}-cache")  # as if evicted
    rep = cache.stats(str(cdir)).to_dict()
    assert rep["manifest_keys_missing"] == [{"module": "jit_step", "key": key("jit_step", 2)}]
    assert rep["warnings"] and rep["roles"]["first_pass"]["entries"] == 1


_UPDATER = r"""
import sys
from pgle.cache import manifest as cache_manifest
d, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    def change(data):
        cache_manifest.record_keys(data, f"jit_{who}", "first_pass", [f"k{who}-{i}"])
        data.setdefault("counter", 0)
        data["counter"] += 1
    cache_manifest.update(d, change)
"""


def test_concurrent_manifest_updates_lose_nothing(tmp_path: Path):
    d = tmp_path / "c"
    d.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", _UPDATER, str(d), str(w), "40"],
                              env=pgle_env()) for w in range(4)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    data = cache_manifest.load(str(d))
    assert data["counter"] == 160
    assert all(len(data["modules"][f"jit_{w}"]["first_pass_keys"]) == 40 for w in range(4))
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")]  # no temp files left behind


# --- a shared cache is untrusted input (issue 20) ------------------------------------------------

def test_stats_prints_totals_per_role_and_module_on_stdout(cdir: Path, tmp_path: Path):
    proc = run_pgle("cache", "stats", str(cdir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    rows = proc.stdout.decode().splitlines()
    assert rows[0].split() == ["ROLE", "ENTRIES", "SIZE"]
    assert any(r.split()[:2] == ["PGLE-optimized", "1"] for r in rows)
    assert any(r.split()[:2] == ["total", "4"] for r in rows)
    header = rows.index(next(r for r in rows if r.startswith("MODULE")))
    modules = {r.split()[0]: r.split()[1] for r in rows[header + 1:]}
    assert modules == {"jit_init": "1", "jit_my-fn": "1", "jit_step": "2"}
    assert pgle_lines(proc) == [f"pgle: 4 entries, 360 B, 3 modules in {cdir}"]


def test_a_manifest_link_is_refused_never_read_or_republished(tmp_path: Path):
    cache_dir = tmp_path / "shared-cache"
    make_cache(cache_dir, {key("jit_step", 1): 10})
    private = tmp_path / "home" / "private.json"  # the victim's own file, 0600
    private.parent.mkdir()
    private.write_text(json.dumps(cache_manifest.empty() | {"environment": {"note": "my notes"}}))
    os.chmod(private, 0o600)
    (cache_dir / cache_manifest.MANIFEST_NAME).symlink_to(private)
    proc = run_pgle("cache", "stats", str(cache_dir), cwd=tmp_path)
    assert proc.returncode == 2 and "symbolic link" in pgle_lines(proc)[0], proc.stderr.decode()
    assert "Traceback" not in proc.stderr.decode()
    # What prewarm does to the manifest: refused, the link left as it is, nothing published.
    with pytest.raises(BadInput, match="symbolic link"):
        cache_manifest.update(str(cache_dir), lambda d: d["runs"].append({"who": "me"}))
    assert (cache_dir / cache_manifest.MANIFEST_NAME).is_symlink()
    assert "my notes" not in "".join(p.read_text() for p in cache_dir.iterdir()
                                     if p.is_file() and not p.is_symlink())
    assert json.loads(private.read_text())["runs"] == [] and \
        (private.stat().st_mode & 0o777) == 0o600


def test_a_dangling_lock_link_creates_nothing(tmp_path: Path):
    cache_dir = tmp_path / "shared-cache"
    make_cache(cache_dir, {key("jit_step", 1): 10})
    target = tmp_path / "home" / ".profile"
    target.parent.mkdir()
    (cache_dir / cache_manifest.LOCK_NAME).symlink_to(target)
    with pytest.raises(BadInput, match="symbolic link"):
        cache_manifest.update(str(cache_dir), lambda d: None)
    assert not target.exists() and not (cache_dir / cache_manifest.MANIFEST_NAME).exists()
    # JAX's own lock file, taken while pruning: a link there is refused too.
    (cache_dir / ".lockfile").symlink_to(target)
    proc = run_pgle("cache", "prune", str(cache_dir), "--older-than", "0s", "--yes", cwd=tmp_path)
    assert proc.returncode == 2 and "JAX cache lock file" in pgle_lines(proc)[0], proc.stderr.decode()
    assert not target.exists() and (cache_dir / f"{key('jit_step', 1)}-cache").exists()
