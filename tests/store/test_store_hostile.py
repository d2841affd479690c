"""A shared store's second hostile round (issue 31): a folder swapped for a link mid-operation
redirects nothing (every operation is relative to the folder opened), `store prune` touches only
entries pgle recognises, a future-dated entry cannot pin a store, nested metadata is one
warning, and a folder of another user is named before pgle writes into it.

Real stores, real links, the real CLI in subprocesses; an attacker process for the race.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.pgle_testing import pgle_lines, report_of, run_pgle
from helpers.smallfs import fill, small_filesystem

from pgle.errors import PgleError
from pgle.launch.runfolder import RunFolder
from pgle.profiles.files import Profile
from pgle.store.store import TIME_FORMAT, ProfileStore

KIND, JAX = "NVIDIA H100", "0.10.2"
FP = "0123456789abcdef0123456789abcdef"


def profile_dir(root: Path, value: float = 1.0) -> Path:
    """A per-module profile directory of one module, FP."""
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{FP}.pbtxt").write_text(f'costs {{ name: "fusion.1" cost_us: {value} }}\n')
    return root


def add(store: Path, cwd: Path, *args: str, jax: str = JAX, kind: str = KIND) -> subprocess.CompletedProcess:
    return run_pgle("store", "add", str(store), str(profile_dir(cwd / "prof")), "--device-kind",
                    kind, "--jax", jax, *args, cwd=cwd)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr.decode(), proc.stderr.decode()


def plant(store: Path, created: dt.datetime, *, entry_time: dt.datetime | None = None,
          folder: str = FP, **fields) -> Path:
    """An entry another user wrote: metadata and profile, named as pgle names them."""
    entry_id = f"{(entry_time or created).astimezone(dt.UTC).strftime(TIME_FORMAT)}-{'e' * 12}"
    meta = {"fingerprint": folder, "entry_id": entry_id, "jax": JAX, "jaxlib": JAX,
            "device_kind": KIND, "device_count": 1, "created": created.isoformat(),
            "source": "planted", "module": "", "instructions": 1} | fields
    d = store / "profiles" / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{entry_id}.pbtxt").write_text('costs { name: "fusion.1" cost_us: 999 }\n')
    (d / f"{entry_id}.json").write_text(json.dumps(meta))
    return d / f"{entry_id}.json"


def entry_ids(store: Path) -> list[str]:
    return sorted(p.stem for p in (store / "profiles" / FP).glob("*.json"))


def tree(root: Path) -> dict[str, bytes | str]:
    return {str(p.relative_to(root)): ("-> " + os.readlink(p) if p.is_symlink() else
                                       p.read_bytes() if p.is_file() else "dir")
            for p in sorted(root.rglob("*"))}


# --- entries pgle recognises ---------------------------------------------------------------------

def test_a_future_dated_entry_never_pins_the_store(tmp_path: Path):
    """The hostile round: an entry dated 2999 sorted newest, so `store add --policy replace`
    trimmed the fresh entry at once while saying "stored". Now the planted one is refused as
    damaged (named in one warning, never served), and the entry added is never trimmed."""
    store = tmp_path / "store"
    planted = plant(store, dt.datetime(2999, 1, 1, tzinfo=dt.UTC))
    proc = add(store, tmp_path, "--policy", "replace", "--json")
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr.decode()
    stored = report_of(proc)["modules"][0]["entry"]
    assert stored in entry_ids(store)
    warnings = [line for line in pgle_lines(proc) if "warning" in line]
    assert len(warnings) == 1 and str(planted) in warnings[0] and "in the future" in warnings[0]
    view = tmp_path / "view"
    got = run_pgle("store", "get", str(store), str(view), "--device-kind", KIND, "--jax", JAX,
                   "--json", cwd=tmp_path)
    assert report_of(got)["modules"][0]["entries"] == [stored]


def test_an_entry_a_little_ahead_never_trims_the_one_just_added(tmp_path: Path):
    """A writer whose clock runs 20 minutes ahead (within the skew pgle allows): its entry
    sorts newer, but `add --policy replace` keeps the entry it has just stored."""
    store = tmp_path / "store"
    plant(store, dt.datetime.now(dt.UTC) + dt.timedelta(minutes=20))
    proc = add(store, tmp_path, "--policy", "replace", "--json")
    assert proc.returncode == 0, proc.stderr.decode()
    assert entry_ids(store) == [report_of(proc)["modules"][0]["entry"]]


def test_an_id_not_dated_by_its_created_time_is_damaged(tmp_path: Path):
    """Serving orders by id, listings by `created`: an entry whose id says 2026-06 and whose
    `created` says 2020 would be served as the newest and listed as the oldest."""
    store = tmp_path / "store"
    planted = plant(store, dt.datetime(2020, 1, 1, tzinfo=dt.UTC),
                    entry_time=dt.datetime(2026, 6, 1, tzinfo=dt.UTC))
    proc = run_pgle("store", "ls", str(store), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    line = next(x for x in pgle_lines(proc) if x.startswith("pgle: warning:"))
    assert str(planted) in line and "not dated by its created time" in line


def test_deeply_nested_metadata_is_one_warning_for_every_command(tmp_path: Path):
    """A metadata file of 100,000 nested arrays gave a RecursionError traceback on every
    store command; a nested object in a field is described, never printed whole."""
    store = tmp_path / "store"
    assert add(store, tmp_path).returncode == 0
    folder = store / "profiles" / FP
    deep = folder / f"{entry_ids(store)[0][:-1]}0.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    field = folder / f"{entry_ids(store)[0][:-1]}1.json"
    field.write_text(json.dumps({"fingerprint": [[[[[[[[1]]]]]]]]} | {k: "x" for k in (
        "entry_id", "jax", "jaxlib", "device_kind", "device_count", "created", "source")}))
    for argv in (["store", "ls", str(store)],
                 ["store", "prune", str(store), "--keep-last", "1", "--yes"],
                 ["store", "get", str(store), str(tmp_path / "v"), "--device-kind", KIND,
                  "--jax", JAX],
                 ["store", "add", str(store), str(tmp_path / "prof"), "--device-kind", KIND,
                  "--jax", JAX]):
        proc = run_pgle(*argv, cwd=tmp_path)
        no_traceback(proc)
        assert proc.returncode == 0, (argv, proc.stderr.decode())
        warnings = [line for line in pgle_lines(proc) if line.startswith("pgle: warning:")]
        assert len(warnings) == 1 and "skipped 2 damaged" in warnings[0], warnings
        assert "nested deeper" in warnings[0] and "a JSON array is not a string" in warnings[0]
        assert "[[" not in warnings[0]
    assert deep.exists() and field.exists()  # named, never deleted


def test_prune_keep_counts_per_jax_version_and_device_kind(tmp_path: Path):
    """--keep N keeps the N newest of each (module, jax, device kind): two of each of four
    keys, `--keep 1` removes one of each; an empty --jax or device kind selects nothing else."""
    store = tmp_path / "store"
    for jax in ("0.10.2", "0.11.0"):
        for kind in ("NVIDIA H100", "NVIDIA A100"):
            for _ in range(2):
                assert add(store, tmp_path, jax=jax, kind=kind).returncode == 0
                time.sleep(0.01)
    dry = report_of(run_pgle("store", "prune", str(store), "--keep-last", "1", "--json", cwd=tmp_path))
    keys = sorted((r["jax"], r["device_kind"]) for r in dry["modules"])
    assert keys == sorted((j, k) for j in ("0.10.2", "0.11.0") for k in ("NVIDIA H100", "NVIDIA A100"))
    done = report_of(run_pgle("store", "prune", str(store), "--keep-last", "1", "--yes", "--json",
                              cwd=tmp_path))
    assert sorted(r["entry_id"] for r in done["modules"]) == sorted(r["entry_id"] for r in dry["modules"])
    assert len(entry_ids(store)) == 4
    proc = run_pgle("store", "add", str(store), str(tmp_path / "prof"), "--device-kind", " ",
                    cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 2 and "cannot be empty" in pgle_lines(proc)[-1], proc.stderr.decode()
    with pytest.raises(PgleError, match="jax version of a store entry cannot be empty"):
        ProfileStore(store).add(FP, Profile(costs=[("fusion.1", 1.0)]), jax="", jaxlib="",
                                device_kind=KIND, device_count=1, source="api")
    assert ProfileStore(store).entries(FP, jax="") == []  # "" selects jax "", not every jax
    assert len(entry_ids(store)) == 4


def test_prune_touches_only_what_pgle_recognises(tmp_path: Path):
    """A store folder holding a user's notes, a folder not named as a fingerprint, a
    fingerprint folder whose name ends in a newline (`$` matched it), a damaged entry: `prune
    --keep 1 --yes` removes exactly the entries the dry run listed, and nothing else."""
    store = tmp_path / "store"
    for _ in range(3):
        assert add(store, tmp_path).returncode == 0
        time.sleep(0.01)
    (store / "README").write_text("our team's store")
    (store / "profiles" / "notes").mkdir()
    (store / "profiles" / "notes" / "a.json").write_text("{}")
    newline = FP[:-1] + "1\n"
    plant(store, dt.datetime(2021, 1, 1, tzinfo=dt.UTC), folder=newline)
    plant(store, dt.datetime(2021, 1, 1, tzinfo=dt.UTC), jax="")  # damaged? no: jax "" is a key
    (store / "profiles" / FP / "mine.txt").write_text("a note")
    ls = report_of(run_pgle("store", "ls", str(store), "--json", cwd=tmp_path))
    assert all(r["fingerprint"] == FP for r in ls["modules"])
    before = tree(store)
    dry = report_of(run_pgle("store", "prune", str(store), "--keep-last", "1", "--json", cwd=tmp_path))
    listed = sorted(r["entry_id"] for r in dry["modules"])
    done = report_of(run_pgle("store", "prune", str(store), "--keep-last", "1", "--yes", "--json",
                              cwd=tmp_path))
    assert sorted(r["entry_id"] for r in done["modules"]) == listed and len(listed) == 2
    after = tree(store)
    gone = sorted(set(before) - set(after))
    assert gone == sorted(f"profiles/{FP}/{i}{s}" for i in listed for s in (".json", ".pbtxt"))


# --- a swap between steps, and in a loop ---------------------------------------------------------

def test_a_folder_swapped_for_a_link_after_the_open_redirects_nothing(tmp_path: Path):
    """Open the fingerprint folder as `add` does, then swap it for a link to the victim's
    private folder (what another user does between a check and a use): the write and the
    trim land in the folder opened; the victim's folder is untouched."""
    shared, private = tmp_path / "shared", tmp_path / "private"
    assert add(shared, tmp_path).returncode == 0
    assert add(private, tmp_path).returncode == 0
    before = tree(private)
    st = ProfileStore(shared)
    old = st.entries(FP)[0]
    real = shared / "profiles" / FP
    with st._entry_folder(FP) as folder:
        os.rename(real, shared / "profiles" / "aside")
        real.symlink_to(private / "profiles" / FP)
        folder.write_atomic("20300101T000000000000Z-000000000000.json", b"{}")
        st._remove(old, folder)
    assert tree(private) == before
    moved = sorted(p.name for p in (shared / "profiles" / "aside").iterdir())
    assert "20300101T000000000000Z-000000000000.json" in moved
    assert f"{old.entry_id}.json" not in moved
    # And a fresh command sees the link: refused in one line, never followed.
    proc = add(shared, tmp_path)
    no_traceback(proc)
    assert proc.returncode == 2 and "symbolic link" in pgle_lines(proc)[-1]
    assert tree(private) == before


SWAPPER = r"""
import os, sys, time
folder, target = sys.argv[1], sys.argv[2]
aside = folder + ".aside"
deadline = time.monotonic() + 300
while time.monotonic() < deadline:
    try:
        os.rename(folder, aside)
        os.symlink(target, folder)
        os.unlink(folder)
        os.rename(aside, folder)
    except OSError:
        pass
"""


def test_a_loop_of_swaps_never_touches_the_victims_private_store(tmp_path: Path):
    """The hostile round's high case: another user swaps a fingerprint folder of the shared
    store for a link to the victim's private store in a loop while the victim adds with
    `--policy replace` (each add trims). Before, within 30-45 s the victim's private entries
    were deleted and files landed there. Now: 300 adds in process and 5 by the CLI; the
    private store is byte for byte what it was."""
    shared, private = tmp_path / "shared", tmp_path / "private"
    for _ in range(3):
        assert add(private, tmp_path, "--policy", "keep:5").returncode == 0
        time.sleep(0.01)
    assert add(shared, tmp_path).returncode == 0
    before = tree(private)
    attacker = subprocess.Popen([sys.executable, "-c", SWAPPER, str(shared / "profiles" / FP),
                                 str(private / "profiles" / FP)])
    refused = 0
    try:
        st = ProfileStore(shared)
        for i in range(300):
            try:
                st.add(FP, Profile(costs=[("fusion.1", float(i + 1))]), jax=JAX, jaxlib=JAX,
                       device_kind=KIND, device_count=1, source="victim", policy="replace")
            except PgleError:
                refused += 1  # a link met at the open: refused, as it should be
        for _ in range(5):
            no_traceback(add(shared, tmp_path, "--policy", "replace"))
    finally:
        attacker.kill()
        attacker.wait()
    assert tree(private) == before
    assert refused < 300  # the victim's work went on


# --- folders of other users, and a full disk at the lease ----------------------------------------

def test_a_store_folder_of_another_user_is_named_before_pgle_writes(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user (chown)")
    store = tmp_path / "store"
    assert add(store, tmp_path).returncode == 0
    os.chown(store / "profiles" / FP, 4242, 4242)
    proc = add(store, tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    warnings = [line for line in pgle_lines(proc) if line.startswith("pgle: warning:")]
    assert len(warnings) == 1, warnings
    assert str(store / "profiles" / FP) in warnings[0] and "belongs to uid 4242" in warnings[0]


def test_a_pgle_folder_of_another_user_is_named_and_its_links_refused(tmp_path: Path, monkeypatch,
                                                                     caplog):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user (chown)")
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".pgle" / "runs").mkdir(parents=True)
    os.chown(tmp_path / ".pgle", 4242, 4242)
    with caplog.at_level("WARNING", logger="pgle"):
        run = RunFolder.create("collect")
    named = [r.getMessage() for r in caplog.records if "belongs to uid 4242" in r.getMessage()]
    assert len(named) == 1 and ".pgle" in named[0]
    assert run.lease.is_file()
    # `.pgle/runs` swapped for a link by that user: refused, nothing made where it points.
    victim = tmp_path / "victim"
    victim.mkdir()
    os.rename(tmp_path / ".pgle" / "runs", tmp_path / ".pgle" / "old")
    (tmp_path / ".pgle" / "runs").symlink_to(victim)
    os.lchown(tmp_path / ".pgle" / "runs", 4242, 4242)
    (tmp_path / "x.py").write_text("print('hi')\n")
    proc = run_pgle("auto", str(tmp_path / "x.py"), cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 2 and "symbolic link" in pgle_lines(proc)[-1], proc.stderr.decode()
    assert list(victim.iterdir()) == []


def test_a_full_disk_at_the_lease_is_one_line(tmp_path: Path):
    """mkdir takes no blocks on tmpfs, the lease's bytes do: the run folder is made and its
    lease cannot be written. One line, exit 1, no empty run folder left."""
    script = tmp_path / "x.py"
    script.write_text("print('hi')\n")
    with small_filesystem(tmp_path / "fs", size_kib=256) as fs:
        fill(fs)
        proc = run_pgle("auto", str(script), cwd=fs)
        no_traceback(proc)
        assert proc.returncode == 1, proc.stderr.decode()
        line = pgle_lines(proc)[-1]
        assert "lease" in line and "No space left on device" in line and "Free some space" in line
        assert list((fs / ".pgle" / "runs").iterdir()) == []
