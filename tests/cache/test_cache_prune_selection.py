"""`pgle cache ls|prune` on a real cache folder: several `--module` globs select every module
matching any of them; a run record naming no real process (pid 0, which kill(2) reads as the
process group) stops nothing; the keys a report lists are the cache's keys, not redacted
(issue 37's independent mutants)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from helpers.pgle_testing import report_of, run_pgle
from pgle.cache import manifest


def _entry(cache: Path, module: str, digit: str) -> str:
    key = f"{module}-{digit * 64}"
    (cache / f"{key}-cache").write_bytes(b"x" * 100)
    return key


def _left(cache: Path) -> list[str]:
    return sorted(p.name.split("-")[0] for p in cache.iterdir() if p.name.endswith("-cache"))


def test_several_module_globs_select_any_of_them(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    for module, digit in (("jit_train", "a"), ("jit_eval", "b"), ("jit_init", "c")):
        _entry(cache, module, digit)
    proc = run_pgle("cache", "prune", str(cache), "--module", "jit_tr*", "--module", "jit_eval",
                    "--yes", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert _left(cache) == ["jit_init"]


def test_a_run_record_with_pid_0_is_no_live_run(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    _entry(cache, "jit_train", "a")

    def forged(data):
        run = manifest.new_run("train.py", None)
        run["pid"] = 0  # kill(0, 0) succeeds: it signals this process group
        data.setdefault("runs", []).append(run)

    manifest.update(str(cache), forged)
    proc = run_pgle("cache", "prune", str(cache), "--module", "jit_*", "--yes", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert _left(cache) == []


def test_cache_ls_lists_the_real_keys(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    key = _entry(cache, "jit_train", "a")
    old = time.time() - 3600
    os.utime(cache / f"{key}-cache", (old, old))
    report = report_of(run_pgle("cache", "ls", str(cache), "--json", cwd=tmp_path))
    assert [e["key"] for e in report["entries"]] == [key], report["entries"]


def test_a_manifest_beyond_its_size_cap_is_refused_unread(tmp_path):
    # A shared cache folder is untrusted: a manifest of more than 64 MiB (a sparse file here,
    # no disk used) is refused with one line before a byte of it is read.
    cache = tmp_path / "cache"
    cache.mkdir()
    _entry(cache, "jit_train", "a")
    with open(cache / "pgle-manifest.json", "wb") as f:
        f.truncate((64 << 20) + 1)
    proc = run_pgle("cache", "ls", str(cache), cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "larger than 67108864 bytes" in err and "Traceback" not in err, err
