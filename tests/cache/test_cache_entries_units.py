"""The cache listing, totals, prune selection and deletion, and the cache manifest, called in
process on real cache folders (entries named as jax 0.4.31-0.12 names them: `<module>-<64 hex>`
plus `-cache`, and `-atime` in a size-capped cache). `pgle cache ls/stats/prune` reach the same
functions in subprocesses (tests/cache/test_cache.py); these pin what a user sees from them:
sizes, counts, order, which entries go and which stay, each error's sentence."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pgle.cache import entries, key_rules, manifest
from pgle.cache.entries import Entry
from pgle.errors import BadInput, PgleError
from pgle.units import iso
from helpers.gs_mock import mock_gs

H = "0123456789abcdef" * 4  # 64 hex
T0 = 1_800_000_000.0  # a fixed write time (2027-01-15)


def key(module: str, n: int) -> str:
    return f"{module}-{H[:-2]}{n:02x}"


def put(d: Path, k: str, size: int, mtime: float = T0, atime_ns: int | None = None) -> None:
    """One entry as jax writes it: `<key>-cache`, and `<key>-atime` (ns, little-endian)."""
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"{k}-cache"
    p.write_bytes(b"x" * size)
    os.utime(p, (mtime, mtime))
    if atime_ns is not None:
        (d / f"{k}-atime").write_bytes(atime_ns.to_bytes(8, "little"))


def names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    d = tmp_path / "cache"
    put(d, key("jit_step", 1), 100, T0 - 300)
    put(d, key("jit_step", 2), 200, T0 - 100, atime_ns=int((T0 + 50) * 1e9))
    put(d, key("jit_step", 3), 300, T0 - 100)  # same time as 2: the key breaks the tie
    put(d, key("jit_init", 4), 50, T0 - 900)
    put(d, key("jit_my-fn", 5), 7, T0 - 10)  # module names may hold '-'
    # What a user keeps there, and JAX's own files: never entries.
    (d / ".lockfile").write_text("")
    (d / "xla_gpu_per_fusion_autotune_cache_dir").mkdir()
    (d / "notes-cache").write_text("mine")  # no 64-hex key
    (d / f"{key('jit_x', 6)}-cache.txt").write_text("mine")
    (d / f"{key('jit_dir', 7)}-cache").mkdir()  # a folder with an entry's name
    return d


RECORDED = {
    "modules": {
        "jit_step": {"first_pass_keys": [key("jit_step", 1)],
                     "pgle_optimized_keys": [key("jit_step", 2)],
                     "plain_keys": [key("jit_step", 3)]},
    },
    "runs": [],
}


# -- listing ---------------------------------------------------------------------
def test_list_entries_sorted_by_module_then_newest_with_sizes_roles_and_atime(cache: Path):
    got = entries.list_entries(str(cache), RECORDED)
    assert [(e.module, e.key, e.size, e.mtime, e.atime_file, e.role) for e in got] == [
        ("jit_init", key("jit_init", 4), 50, T0 - 900, False, "unknown"),
        ("jit_my-fn", key("jit_my-fn", 5), 7, T0 - 10, False, "unknown"),
        ("jit_step", key("jit_step", 2), 200, T0 - 100, True, "pgle_optimized"),
        ("jit_step", key("jit_step", 3), 300, T0 - 100, False, "plain"),
        ("jit_step", key("jit_step", 1), 100, T0 - 300, False, "first_pass"),
    ]


def test_list_entries_without_a_manifest_has_every_role_unknown(cache: Path):
    assert {e.role for e in entries.list_entries(str(cache))} == {"unknown"}
    assert {e.role for e in entries.list_entries(str(cache), {})} == {"unknown"}


def test_list_entries_accepts_the_file_url_spelling(cache: Path):
    plain = entries.list_entries(str(cache), RECORDED)
    assert entries.list_entries("file://" + str(cache), RECORDED) == plain


def test_an_atime_file_without_its_cache_file_is_no_entry(tmp_path: Path):
    d = tmp_path / "c"
    d.mkdir()
    (d / f"{key('jit_gone', 1)}-atime").write_bytes((5).to_bytes(8, "little"))
    put(d, key("jit_here", 2), 3)
    assert [e.key for e in entries.list_entries(str(d))] == [key("jit_here", 2)]


def test_links_and_folders_named_like_entries_are_not_listed(tmp_path: Path):
    d = tmp_path / "c"
    put(d, key("jit_real", 1), 10)
    outside = tmp_path / "outside-cache"
    outside.write_bytes(b"y" * 999)
    os.symlink(outside, d / f"{key('jit_link', 2)}-cache")
    (d / f"{key('jit_dir', 3)}-cache").mkdir()
    assert [(e.key, e.size) for e in entries.list_entries(str(d))] == [(key("jit_real", 1), 10)]


def test_scan_yields_name_size_and_mtime_of_entry_files_only(cache: Path):
    got = sorted(entries._scan(str(cache)))
    assert got == sorted([
        (f"{key('jit_step', 1)}-cache", 100, T0 - 300),
        (f"{key('jit_step', 2)}-cache", 200, T0 - 100),
        (f"{key('jit_step', 2)}-atime", 8, pytest.approx(time.time(), abs=600)),
        (f"{key('jit_step', 3)}-cache", 300, T0 - 100),
        (f"{key('jit_init', 4)}-cache", 50, T0 - 900),
        (f"{key('jit_my-fn', 5)}-cache", 7, T0 - 10),
        ("notes-cache", 4, pytest.approx(time.time(), abs=600)),  # list_entries drops it by key
    ])


def test_an_entry_evicted_while_listing_is_skipped_and_the_listing_goes_on(tmp_path: Path):
    d = tmp_path / "c"
    for n in range(3):
        put(d, key("m", n), n + 1)
    order = os.listdir(d)  # the order readdir gives, which scandir follows
    scan = entries._scan(str(d))
    first = next(scan)
    assert first[0] == order[0]
    os.unlink(d / order[1])  # JAX evicts it after readdir saw it, before its stat
    assert [name for name, _, _ in scan] == [order[2]]


def test_listing_a_missing_dir_or_a_file_is_one_sentence(tmp_path: Path):
    with pytest.raises(BadInput) as e:
        entries.list_entries(str(tmp_path / "nope"))
    assert e.value.message == f"cache dir {tmp_path / 'nope'} does not exist."
    f = tmp_path / "afile"
    f.write_text("")
    with pytest.raises(BadInput) as e:
        entries.list_entries(str(f))
    assert e.value.message == f"{f} is not a directory."


def test_a_cache_dir_the_user_cannot_read_is_one_sentence(tmp_path: Path):
    """Run as nobody (root reads any folder): tmp_path's parents are root's, mode 0700."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the listing as another user")
    d = tmp_path / "c"
    put(d, key("m", 1), 1)
    assert len(entries.list_entries(str(d))) == 1
    code = ("import os; from pgle.cache import entries; from pgle.errors import BadInput\n"
            "os.setuid(65534)\n"
            f"try: entries.list_entries({str(d)!r})\n"
            "except BadInput as e: print(e.message)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == f"cannot read cache dir {d}: permission denied.", out.stderr


def test_an_empty_cache_lists_nothing(tmp_path: Path):
    assert entries.list_entries(str(tmp_path)) == []
    assert entries.totals([]) == []


def test_entry_to_dict_is_what_ls_json_shows(cache: Path):
    e = entries.list_entries(str(cache), RECORDED)[2]
    assert e.to_dict() == {
        "module": "jit_step",
        "key": key("jit_step", 2),
        "size": 200,
        "mtime": T0 - 100,
        "modified": iso(T0 - 100),
        "role": "pgle_optimized",
        "role_label": "PGLE-optimized",
        "atime_file": True,
    }
    assert entries.list_entries(str(cache), RECORDED)[4].to_dict()["role_label"] == "first-pass"


# -- totals ------------------------------------------------------------------------
def test_totals_per_module_count_bytes_newest_roles_and_status(cache: Path):
    got = entries.totals(entries.list_entries(str(cache), RECORDED))
    assert got == [
        {"module": "jit_init", "entries": 1, "bytes": 50, "newest": iso(T0 - 900),
         "roles": {"unknown": 1}, "status": "unknown"},
        {"module": "jit_my-fn", "entries": 1, "bytes": 7, "newest": iso(T0 - 10),
         "roles": {"unknown": 1}, "status": "unknown"},
        {"module": "jit_step", "entries": 3, "bytes": 600, "newest": iso(T0 - 100),
         "roles": {"pgle_optimized": 1, "plain": 1, "first_pass": 1}, "status": "pgle_optimized"},
    ]


def test_totals_newest_is_the_latest_write_whatever_the_order():
    es = [Entry("m", key("m", 1), 1, T0 - 5, False, "plain"),
          Entry("m", key("m", 2), 2, T0, False, "plain"),
          Entry("m", key("m", 3), 3, T0 - 9, False, "plain")]
    for order in (es, es[::-1]):
        (t,) = entries.totals(order)
        assert (t["entries"], t["bytes"], t["newest"], t["roles"]) == (3, 6, iso(T0), {"plain": 3})


def test_an_entry_written_at_the_epoch_shows_no_newest_date(tmp_path: Path):
    d = tmp_path / "c"
    put(d, key("m", 1), 5, mtime=0.0)  # what an archive restored without times may hold
    (t,) = entries.totals(entries.list_entries(str(d)))
    assert (t["entries"], t["bytes"], t["newest"]) == (1, 5, None)


@pytest.mark.parametrize("roles, status", [
    ({"plain": 2, "first_pass": 1, "pgle_optimized": 1}, "pgle_optimized"),
    ({"plain": 2, "first_pass": 1}, "first_pass"),
    ({"plain": 2, "unknown": 5}, "plain"),
    ({"unknown": 5}, "unknown"),
    ({"pgle_optimized": 0, "plain": 1}, "plain"),  # a zero count is no entry
])
def test_a_module_status_is_its_most_useful_role(roles, status):
    assert entries._module_status(roles) == status


# -- selection -----------------------------------------------------------------------
def test_select_by_age_uses_the_lru_stamp_and_includes_the_boundary(cache: Path):
    es = entries.list_entries(str(cache), RECORDED)
    # jit_step 2 was written at T0-100 but read at T0+50 (its -atime): recently used.
    got = entries.select(str(cache), es, older_than=150, now=T0 + 50)
    assert [e.key for e in got] == [key("jit_init", 4), key("jit_step", 3), key("jit_step", 1)]
    # exactly older_than seconds ago counts as old enough
    got = entries.select(str(cache), es, older_than=900, now=T0)
    assert [e.key for e in got] == [key("jit_init", 4)]
    got = entries.select(str(cache), es, older_than=901, now=T0)
    assert got == []


def test_select_without_criteria_takes_all_and_globs_are_case_sensitive(cache: Path):
    es = entries.list_entries(str(cache))
    assert entries.select(str(cache), es, now=T0) == es
    assert entries.select(str(cache), es, modules=("JIT_*",), now=T0) == []
    got = entries.select(str(cache), es, modules=("jit_init", "jit_my-*"), now=T0)
    assert [e.module for e in got] == ["jit_init", "jit_my-fn"]
    got = entries.select(str(cache), es, modules=("jit_step",), older_than=200, now=T0)
    assert [e.key for e in got] == [key("jit_step", 1)]


def test_selected_matches_any_glob_and_no_glob_matches_all():
    assert entries.selected("jit_step", ()) is True
    assert entries.selected("jit_step", ("jit_s*",)) is True
    assert entries.selected("jit_step", ("x", "*step")) is True
    assert entries.selected("jit_step", ("x", "y")) is False
    assert entries.selected("jit_step", ("Jit_step",)) is False


# -- last use --------------------------------------------------------------------------
def test_last_used_is_the_newer_of_write_and_access(tmp_path: Path):
    d = tmp_path / "c"
    put(d, key("m", 1), 1, T0, atime_ns=int((T0 + 3600) * 1e9))
    put(d, key("m", 2), 1, T0, atime_ns=int((T0 - 3600) * 1e9))  # stamp older than the write
    put(d, key("m", 3), 1, T0)
    got = {e.key: entries.last_used(str(d), e) for e in entries.list_entries(str(d))}
    assert got == {key("m", 1): T0 + 3600, key("m", 2): T0, key("m", 3): T0}


def test_last_used_reads_only_the_first_8_bytes_of_the_stamp(tmp_path: Path):
    d = tmp_path / "c"
    put(d, key("m", 1), 1, T0)
    (d / f"{key('m', 1)}-atime").write_bytes(int((T0 + 60) * 1e9).to_bytes(8, "little") + b"\xff" * 8)
    (e,) = entries.list_entries(str(d))
    assert entries.last_used(str(d), e) == T0 + 60


def test_last_used_falls_back_to_the_write_time_when_the_stamp_is_gone_or_a_link(tmp_path: Path):
    d = tmp_path / "c"
    put(d, key("m", 1), 1, T0, atime_ns=int((T0 + 60) * 1e9))
    put(d, key("m", 2), 1, T0, atime_ns=int((T0 + 60) * 1e9))
    es = entries.list_entries(str(d))
    os.unlink(d / f"{key('m', 1)}-atime")  # evicted after the listing
    target = tmp_path / "stamp"
    target.write_bytes(int((T0 + 9e6) * 1e9).to_bytes(8, "little"))
    os.unlink(d / f"{key('m', 2)}-atime")
    os.symlink(target, d / f"{key('m', 2)}-atime")  # planted after the listing: never followed
    assert [entries.last_used(str(d), e) for e in es] == [T0, T0]


def test_read_bytes_reads_at_most_the_limit_and_refuses_links_and_fifos(tmp_path: Path):
    f = tmp_path / "f"
    f.write_bytes(bytes(range(100)))
    assert entries._read_bytes(str(f)) == bytes(range(64))
    assert entries._read_bytes(str(f), limit=8) == bytes(range(8))
    link = tmp_path / "link"
    os.symlink(f, link)
    with pytest.raises(OSError) as e:
        entries._read_bytes(str(link))
    assert e.value.errno == errno.ELOOP
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[BaseException | bytes] = []

    def read_fifo() -> None:
        try:
            got.append(entries._read_bytes(str(fifo)))
        except OSError as err:
            got.append(err)

    reader = threading.Thread(target=read_fifo, daemon=True)
    reader.start()
    # It returns at once; only a blocking open waits for a writer: 5 s, well before a mutation
    # run's wall-clock limit (where a hang reads as a timeout, not a failure).
    reader.join(5)
    blocked = reader.is_alive()
    if blocked:  # let the reader go so the test ends, then fail
        os.close(os.open(fifo, os.O_WRONLY))
        reader.join(30)
    assert not blocked, "reading a FIFO planted at an entry's name waited for a writer"
    (err,) = got
    assert isinstance(err, OSError)
    assert (err.errno, err.strerror, err.filename) == (errno.EINVAL, "not a regular file", str(fifo))
    with pytest.raises(OSError) as e:
        entries._read_bytes(str(tmp_path))
    assert e.value.errno == errno.EINVAL


# -- deletion --------------------------------------------------------------------------
def test_delete_entries_removes_cache_and_atime_files_and_nothing_else(cache: Path):
    before = names(cache)
    es = entries.list_entries(str(cache), RECORDED)
    chosen = [e for e in es if e.module == "jit_step" and e.key != key("jit_step", 3)]
    deleted, errors = entries.delete_entries(str(cache), chosen)
    assert (deleted, errors) == (chosen, [])
    gone = {f"{key('jit_step', 1)}-cache", f"{key('jit_step', 2)}-cache",
            f"{key('jit_step', 2)}-atime"}
    assert names(cache) == sorted(set(before) - gone)
    assert [e.key for e in entries.list_entries(str(cache))] == [
        key("jit_init", 4), key("jit_my-fn", 5), key("jit_step", 3)]


def test_delete_entries_under_jax_lock_file_keeps_it(cache: Path):
    # .lockfile exists (the fixture): deletion takes it and leaves it, empty, where it was.
    es = entries.list_entries(str(cache))
    deleted, errors = entries.delete_entries(str(cache), es)
    assert (len(deleted), errors) == (5, [])
    assert (cache / ".lockfile").read_bytes() == b""
    assert names(cache) == sorted([".lockfile", "xla_gpu_per_fusion_autotune_cache_dir",
                                   "notes-cache", f"{key('jit_x', 6)}-cache.txt",
                                   f"{key('jit_dir', 7)}-cache"])


def test_delete_entries_without_a_lock_file_creates_none(tmp_path: Path):
    d = tmp_path / "c"
    put(d, key("m", 1), 1)
    deleted, errors = entries.delete_entries(str(d), entries.list_entries(str(d)))
    assert (len(deleted), errors, names(d)) == (1, [], [])


def test_an_entry_gone_since_the_listing_counts_as_deleted(tmp_path: Path):
    d = tmp_path / "c"
    put(d, key("m", 1), 1, atime_ns=5)
    put(d, key("m", 2), 1)
    es = entries.list_entries(str(d))
    os.unlink(d / f"{key('m', 1)}-cache")
    os.unlink(d / f"{key('m', 1)}-atime")
    deleted, errors = entries.delete_entries(str(d), es)
    assert ([e.key for e in deleted], errors, names(d)) == ([key("m", 1), key("m", 2)], [], [])


def test_a_failed_deletion_is_one_sentence_and_the_rest_goes_on(tmp_path: Path):
    d = tmp_path / "c"
    put(d, key("m", 1), 1)
    put(d, key("m", 2), 1)
    put(d, key("m", 3), 1)
    es = entries.list_entries(str(d))
    # Swapped for a folder after the listing: unlink(2) fails with EISDIR.
    os.unlink(d / f"{key('m', 2)}-cache")
    (d / f"{key('m', 2)}-cache").mkdir()
    deleted, errors = entries.delete_entries(str(d), es)
    assert [e.key for e in deleted] == [key("m", 1), key("m", 3)]
    assert errors == [f"{key('m', 2)}: Is a directory"]
    assert names(d) == [f"{key('m', 2)}-cache"]


def test_delete_refuses_a_key_that_is_no_entry_name(tmp_path: Path):
    d = tmp_path / "c"
    d.mkdir()
    (d / "precious-cache").write_text("mine")
    forged = Entry("precious", "precious", 4, T0, False, "unknown")
    with pytest.raises(AssertionError, match="precious-cache"):
        entries._delete_entry(str(d), forged)
    assert (d / "precious-cache").read_text() == "mine"


def test_manifest_keys_missing_lists_optimized_keys_not_on_disk_by_module():
    recorded = {"modules": {
        "jit_z": {"pgle_optimized_keys": [key("jit_z", 1)]},
        "jit_a": {"pgle_optimized_keys": [key("jit_a", 2), key("jit_a", 3)],
                  "first_pass_keys": [key("jit_a", 9)]},
        "jit_b": {},
    }}
    assert entries.manifest_keys_missing(recorded, {key("jit_a", 3)}) == [
        {"module": "jit_a", "key": key("jit_a", 2)},
        {"module": "jit_z", "key": key("jit_z", 1)},
    ]
    assert entries.manifest_keys_missing(None, set()) == []
    assert entries.manifest_keys_missing({}, set()) == []
    assert entries.manifest_keys_missing({"runs": []}, set()) == []


# -- writability -------------------------------------------------------------------------
def test_check_writable_dir_creates_when_asked_and_leaves_no_probe(tmp_path: Path):
    d = tmp_path / "a" / "b"
    assert entries.check_writable_dir(str(d), create=True) == str(d)
    assert d.is_dir() and names(d) == []
    assert entries.check_writable_dir(str(d), create=False) == str(d)
    assert names(d) == []


def test_check_writable_dir_accepts_an_existing_dir_with_create(tmp_path: Path):
    put(tmp_path / "c", key("m", 1), 1)
    assert entries.check_writable_dir(str(tmp_path / "c"), create=True) == str(tmp_path / "c")
    assert names(tmp_path / "c") == [f"{key('m', 1)}-cache"]


def test_check_writable_dir_probes_the_dir_itself():
    # /proc is a folder no one can create files in (root included): the probe must fail there.
    with pytest.raises(BadInput) as e:
        entries.check_writable_dir("/proc", create=False)
    assert e.value.message.startswith("cannot use cache dir /proc: ")


def test_check_writable_dir_refuses_a_missing_dir_without_create(tmp_path: Path):
    with pytest.raises(BadInput) as e:
        entries.check_writable_dir(str(tmp_path / "nope"), create=False)
    assert e.value.message == f"cache dir {tmp_path / 'nope'} does not exist."
    assert not (tmp_path / "nope").exists()


def test_check_writable_dir_says_what_failed_and_how_to_fix_it(tmp_path: Path):
    f = tmp_path / "afile"
    f.write_text("")
    with pytest.raises(BadInput) as e:
        entries.check_writable_dir(str(f / "sub"), create=True, what="prune")
    assert e.value.message == f"cannot prune cache dir {f / 'sub'}: Not a directory."
    assert e.value.hint == "Pick a directory you can write to (--cache-dir)."
    with pytest.raises(BadInput) as e:
        entries.check_writable_dir(str(f), create=True)
    assert e.value.message == f"cannot use cache dir {f}: File exists."


def test_a_remote_cache_dir_is_not_probed(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert entries.check_writable_dir("gs://bucket/cache", create=True) == "gs://bucket/cache"
    assert names(tmp_path) == []  # no local folder named `gs:`


# -- the manifest ----------------------------------------------------------------------
def test_is_remote_local_form_join_and_manifest_path():
    assert manifest.is_remote("gs://b/c") is True
    assert manifest.is_remote("s3://b") is True
    assert manifest.is_remote("file:///tmp/c") is False
    assert manifest.is_remote("/tmp/c") is False
    assert manifest.is_remote(Path("/tmp/c")) is False
    assert manifest.local_form("file:///tmp/c") == "/tmp/c"
    assert manifest.local_form(Path("/tmp/c")) == "/tmp/c"
    assert manifest.local_form("gs://b/c") == "gs://b/c"
    assert manifest.join("gs://b/c/", "k-cache") == "gs://b/c/k-cache"
    assert manifest.join("gs://b/c", "k-cache") == "gs://b/c/k-cache"
    assert manifest.join("gs://b/c//", "k-cache") == "gs://b/c/k-cache"
    assert manifest.join("gs://b/cacheX", "k-cache") == "gs://b/cacheX/k-cache"
    assert manifest.join("/tmp/c", "k-cache") == "/tmp/c/k-cache"
    assert manifest.manifest_path("file:///tmp/c") == "/tmp/c/pgle-manifest.json"
    assert manifest.manifest_path("gs://b/c") == "gs://b/c/pgle-manifest.json"


def test_empty_manifest():
    assert manifest.empty() == {"format": 1, "environment": None, "modules": {}, "runs": []}
    a = manifest.empty()
    a["modules"]["x"] = {}
    assert manifest.empty()["modules"] == {}


FIX = ("Move it away (or delete it) and run `pgle prewarm` again; the cache entries "
       "themselves are fine.")


@pytest.mark.parametrize("text, says", [
    ("{not json", "is corrupt (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))."),
    ("[]", "is not a pgle manifest (no 'modules' object or 'runs' list)."),
    ('{"format": 1, "modules": [], "runs": []}', "is not a pgle manifest (no 'modules' object or 'runs' list)."),
    ('{"format": 1, "runs": []}', "is not a pgle manifest (no 'modules' object or 'runs' list)."),
    ('{"format": 1, "modules": {}, "runs": {}}', "is not a pgle manifest (no 'modules' object or 'runs' list)."),
    ('{"format": 1, "modules": {}}', "is not a pgle manifest (no 'modules' object or 'runs' list)."),
    ('{"format": 2, "modules": {}, "runs": []}', "has format 2; this pgle reads format 1."),
    ('{"modules": {}, "runs": []}', "has format None; this pgle reads format 1."),
    ('{"format": "1", "modules": {}, "runs": []}', "has format '1'; this pgle reads format 1."),
])
def test_parse_refuses_what_is_no_manifest_with_one_sentence(text, says):
    with pytest.raises(manifest.ManifestError) as e:
        manifest.parse(text, "/c/pgle-manifest.json")
    assert e.value.message == f"cache manifest /c/pgle-manifest.json {says}"
    assert e.value.hint == FIX
    with pytest.raises(manifest.ManifestError) as e:
        manifest.parse(text)
    assert e.value.message.startswith("cache manifest pgle-manifest.json ")


def test_parse_returns_the_manifest():
    data = {"format": 1, "environment": {"A": "1"}, "modules": {"m": {}}, "runs": [{"id": "r"}]}
    assert manifest.parse(json.dumps(data)) == data


def test_load_none_when_absent_and_one_sentence_when_unreadable(tmp_path: Path):
    assert manifest.load(str(tmp_path)) is None
    (tmp_path / manifest.MANIFEST_NAME).mkdir()
    with pytest.raises(BadInput) as e:
        manifest.load(str(tmp_path))
    assert e.value.message == f"cache manifest {tmp_path / manifest.MANIFEST_NAME} is not a regular file."


def test_load_names_the_manifest_path_in_its_errors(tmp_path: Path):
    path = tmp_path / manifest.MANIFEST_NAME
    path.write_text("{not json")
    with pytest.raises(manifest.ManifestError) as e:
        manifest.load(str(tmp_path))
    assert e.value.message.startswith(f"cache manifest {path} is corrupt (")
    f = tmp_path / "afile"
    f.write_text("")
    with pytest.raises(manifest.ManifestError) as e:
        manifest.load(str(f))
    assert e.value.message == f"cannot read cache manifest {f / manifest.MANIFEST_NAME}: Not a directory."


def test_a_manifest_over_its_size_cap_is_refused_unread(tmp_path: Path):
    path = tmp_path / manifest.MANIFEST_NAME
    with open(path, "wb") as f:
        f.truncate(manifest.MAX_MANIFEST_BYTES + 1)  # sparse: no disk used
    with pytest.raises(BadInput) as e:
        manifest.load(str(tmp_path))
    assert e.value.message == f"cache manifest {path} is larger than {64 << 20} bytes."


def test_a_manifest_with_bytes_that_are_no_utf8_still_loads(tmp_path: Path):
    data = manifest.empty()
    data["runs"] = [{"id": "r", "workload": "python tr\u00e9in.py"}]
    raw = json.dumps(data, ensure_ascii=False).encode().replace("é".encode(), b"\xe9")
    (tmp_path / manifest.MANIFEST_NAME).write_bytes(raw)
    assert manifest.load(str(tmp_path))["runs"][0]["workload"] == "python tr\ufffdin.py"


def test_update_writes_sorted_redacted_json_without_private_keys_and_returns_the_result(tmp_path: Path):
    def change(data):
        manifest.record_keys(data, "jit_step", manifest.ROLE_FIRST_PASS, [key("jit_step", 1)])
        data["environment"] = {"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true",
                               "DB_PASSWORD": "hunter2"}
        data["_scratch"] = "not kept"
        return "done"

    assert manifest.update("file://" + str(tmp_path), change) == "done"
    text = (tmp_path / manifest.MANIFEST_NAME).read_text()
    data = json.loads(text)
    assert "hunter2" not in text and "_scratch" not in data
    assert data["modules"] == {"jit_step": {"first_pass_keys": [key("jit_step", 1)],
                                            "pgle_optimized_keys": [], "plain_keys": []}}
    assert data["environment"]["XLA_FLAGS"] == "--xla_gpu_enable_latency_hiding_scheduler=true"
    assert text == json.dumps(data, indent=1, sort_keys=True) + "\n"
    assert manifest.load(str(tmp_path)) == data
    # A second update reads the first back: nothing is lost.
    manifest.update(str(tmp_path), lambda d: manifest.record_keys(
        d, "jit_step", manifest.ROLE_PGLE_OPTIMIZED, [key("jit_step", 2)]))
    assert manifest.load(str(tmp_path))["modules"]["jit_step"]["pgle_optimized_keys"] == [key("jit_step", 2)]
    assert manifest.load(str(tmp_path))["modules"]["jit_step"]["first_pass_keys"] == [key("jit_step", 1)]


def test_a_manifest_that_cannot_be_written_is_one_sentence(tmp_path: Path):
    (tmp_path / manifest.MANIFEST_NAME).mkdir()  # rename(2) over a folder fails
    with pytest.raises(PgleError) as e:
        manifest._write(str(tmp_path), manifest.empty())
    assert e.value.message.startswith("cannot write ") and manifest.MANIFEST_NAME in e.value.message


def test_key_roles_maps_every_key_and_optimized_wins():
    data = {"modules": {
        "a": {"first_pass_keys": ["k1", "k2"], "pgle_optimized_keys": ["k2"], "plain_keys": ["k3"]},
        "b": {"plain_keys": ["k4", "k1"], "first_pass_keys": ["k5"]},
        "c": {},
    }}
    assert manifest.key_roles(data) == {"k1": "first_pass", "k2": "pgle_optimized",
                                        "k3": "plain", "k4": "plain", "k5": "first_pass"}
    assert manifest.key_roles({}) == {}


def test_record_keys_appends_new_keys_once_in_order():
    data = manifest.empty()
    got = manifest.record_keys(data, "m", manifest.ROLE_PLAIN, ["k2", "k1", "k2"])
    assert got == {"first_pass_keys": [], "pgle_optimized_keys": [], "plain_keys": ["k2", "k1"]}
    assert data["modules"]["m"] is got
    manifest.record_keys(data, "m", manifest.ROLE_PLAIN, ["k1", "k3"])
    manifest.record_keys(data, "m", manifest.ROLE_PGLE_OPTIMIZED, ["k9"])
    assert data["modules"]["m"] == {"first_pass_keys": [], "pgle_optimized_keys": ["k9"],
                                    "plain_keys": ["k2", "k1", "k3"]}
    # a module recorded by an older pgle, without the field
    data["modules"]["old"] = {"first_pass_keys": ["a"]}
    manifest.record_keys(data, "old", manifest.ROLE_PLAIN, ["b"])
    assert data["modules"]["old"] == {"first_pass_keys": ["a"], "plain_keys": ["b"]}


def test_new_run_names_this_process_on_this_host():
    before = time.time()
    run = manifest.new_run("python train.py", {"XLA_FLAGS": "x"})
    host, pid = socket.gethostname(), os.getpid()
    assert run["id"].endswith(f"-{host}-{pid}") and len(run["id"].split("-")[0]) == 15
    assert run["id"][8] == "T"
    assert {k: v for k, v in run.items() if k not in ("id", "started")} == {
        "state": "in_progress", "pid": pid, "host": host, "finished": None,
        "workload": "python train.py", "environment": {"XLA_FLAGS": "x"}}
    assert before <= run["started"] <= time.time()


@pytest.fixture
def live_child():
    """A process of this user that runs until the test ends."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield child
    child.kill()
    child.wait()


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_runs_in_progress_on_this_host_follow_the_process(live_child):
    host = socket.gethostname()
    mine = {"state": "in_progress", "host": host, "pid": live_child.pid, "started": 0}
    gone = {"state": "in_progress", "host": host, "pid": dead_pid(), "started": time.time()}
    finished = {"state": "finished", "host": host, "pid": live_child.pid, "started": time.time()}
    no_state = {"host": host, "pid": live_child.pid, "started": time.time()}
    other_unstarted = {"state": "in_progress", "host": "not-" + host, "pid": 1, "started": None}
    recent = {"state": "in_progress", "host": "not-" + host, "pid": 1,
              "started": time.time() - manifest.STALE_REMOTE_RUN_SECS + 600}
    data = {"runs": [mine, gone, finished, no_state, other_unstarted, recent]}
    assert manifest.runs_in_progress(data) == [mine, recent]
    assert manifest.runs_in_progress(None) == []
    assert manifest.runs_in_progress({}) == []
    assert manifest.runs_in_progress({"format": 1, "modules": {}}) == []  # no runs list
    assert manifest.STALE_REMOTE_RUN_SECS == 24 * 3600
    assert live_child.poll() is None  # asked about, never signalled


def test_pid_alive_only_for_a_real_process_id(live_child):
    assert manifest.pid_alive(live_child.pid) is True
    assert live_child.poll() is None  # kill(pid, 0) sends nothing
    assert manifest.pid_alive(dead_pid()) is False
    for forged in (0, -1, True, "12", None, 1.0, (1 << 22) + 1, 10**30):
        assert manifest.pid_alive(forged) is False, forged


def test_pid_alive_sends_the_process_no_signal():
    """kill(pid, 0) only asks: the child blocks every signal it can and, once asked, lists
    what is pending (a signal sent is pending there, whatever its kind; none may be)."""
    code = ("import signal, sys\n"
            "signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - "
            "{signal.SIGKILL, signal.SIGSTOP})\n"
            "print('ready', flush=True)\n"
            "sys.stdin.read()\n"
            "print(sorted(int(s) for s in signal.sigpending()), flush=True)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        assert manifest.pid_alive(child.pid) is True
        out, _ = child.communicate("", timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert out == "[]\n" and child.returncode == 0


def test_another_users_process_is_alive(live_child):
    """kill(2) answers EPERM for a process of another user: alive (prune must wait for it).
    The check runs as nobody, so the test's own processes are another user's."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run the check as another user")
    assert manifest.pid_alive(live_child.pid) is True
    # Imported as root, then run as nobody: the question kill(2) answers with EPERM. Pid 1 is
    # a process too (a prewarm that is a container's first process records pid 1); asked as
    # nobody, so that no mistaken signal could reach this machine's init.
    code = ("from pgle.cache import manifest; import os; os.setuid(65534); "
            f"print(manifest.pid_alive({live_child.pid}), manifest.pid_alive(1))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "True"], out.stderr
    assert live_child.poll() is None


def test_relocatable_prewarm_turns_xla_caches_off_where_the_key_holds_the_path():
    assert key_rules.relocatable_variables((0, 10, 2)) == {
        "JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES": "none"}
    assert key_rules.relocatable_variables((0, 11, 0)) == {}
    assert key_rules.relocatable_variables((0, 4, 35)) == {}


# -- a gs:// cache, mapped onto a local folder with etils' own epath.testing.mock_epath -------
def _gs(tmp_path: Path):
    """etils' mock of its gs:// backend over `tmp_path/bucket` (as tests/store/ do): the
    remote branches run etils' real code on real files."""
    bucket = tmp_path / "bucket"
    return mock_gs(bucket), bucket


def test_a_gs_cache_is_listed_read_pruned_and_keeps_its_manifest(tmp_path: Path):
    mock, bucket = _gs(tmp_path)
    d = bucket / "team" / "cache"
    k1, k2, k3 = key("jit_step", 1), key("jit_step", 2), key("jit_init", 3)
    put(d, k1, 100, T0 - 300)
    put(d, k2, 200, T0 - 100, atime_ns=int((T0 + 50) * 1e9))
    put(d, k3, 30, T0 - 900, atime_ns=int((T0 - 5000) * 1e9))  # stamped before its write
    (d / "notes-cache").write_text("mine")  # not an entry's name
    url = "gs://team/cache"
    with mock:
        listed = entries.list_entries(url)
        assert [(e.module, e.key, e.size, e.mtime, e.atime_file) for e in listed] == [
            ("jit_init", k3, 30, T0 - 900, True),
            ("jit_step", k2, 200, T0 - 100, True),
            ("jit_step", k1, 100, T0 - 300, False),
        ]
        by_key = {e.key: e for e in listed}
        assert entries.last_used(url, by_key[k2]) == T0 + 50  # the -atime stamp, read remotely
        assert entries.last_used(url, by_key[k3]) == T0 - 900  # the write is newer
        assert entries.last_used(url, by_key[k1]) == T0 - 300  # no stamp
        (d / "big").write_bytes(bytes(range(100)))  # at most `limit` bytes of a remote file too
        assert entries._read_bytes(f"{url}/big") == bytes(range(64))
        assert entries._read_bytes(f"{url}/big", limit=8) == bytes(range(8))
        (d / "big").unlink()
        deleted, errors = entries.delete_entries(url, [by_key[k2], by_key[k1]])
        assert (deleted, errors) == ([by_key[k2], by_key[k1]], [])
        assert names(d) == [f"{k3}-atime", f"{k3}-cache", "notes-cache"]
        # Deleted meanwhile (by another prune): nothing to say.
        assert entries.delete_entries(url, [by_key[k1]]) == ([by_key[k1]], [])
        # The manifest: none yet, then written and read back through the same backend.
        assert manifest.load(url) is None
        manifest.update(url, lambda m: manifest.record_keys(
            m, "jit_init", manifest.ROLE_PGLE_OPTIMIZED, [k3]))
        text = (d / "pgle-manifest.json").read_text()
        assert json.loads(text)["modules"] == {"jit_init": {
            "first_pass_keys": [], "pgle_optimized_keys": [k3], "plain_keys": []}}
        assert text.endswith("}\n") and text.startswith('{\n "environment": null,\n')
        assert manifest.load(url) == json.loads(text)
        assert [e.role for e in entries.list_entries(url, manifest.load(url))] == ["pgle_optimized"]
        with pytest.raises(BadInput) as e:
            entries.list_entries("gs://team/none")
        assert e.value.message.startswith("cannot list cache dir gs://team/none: ")
        assert e.value.message.endswith("No such file or directory: "
                                        f"'{bucket / 'team' / 'none'}'.")
