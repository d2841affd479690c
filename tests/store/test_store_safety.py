"""A profile store shared with other users is untrusted input (issue 20): what another user
planted or broke in it never makes pgle delete, write or read outside it, follow a link, or
fail for everyone; a full disk, a read-only mount, `ulimit -f` and a kill -9 leave it whole.

Real stores on disk, the real CLI in subprocesses. The "attacker" is whoever wrote the planted
files (the test); the victim is the user running pgle (this process's user, also the
unprivileged CI user).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.pgle_testing import DATA, TESTS, pgle_env, pgle_lines, run_pgle
from helpers.smallfs import fill, small_filesystem

from pgle.profiles.files import Profile
from pgle.store.store import ProfileStore

REFERENCE = DATA / "nsys" / "pgle_costs_reference"  # real per-module profiles (nsys-jax output)
FP = [f"{i:032x}" for i in range(1, 4)]
KIND, JAX = "NVIDIA H100", "0.10.2"


def add(store: Path, *args: str, cwd: Path, profile: Path = REFERENCE) -> subprocess.CompletedProcess:
    return run_pgle("store", "add", str(store), str(profile), "--device-kind", KIND, "--jax", JAX,
                    *args, cwd=cwd)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr.decode(), proc.stderr.decode()


def victim_folder(root: Path) -> tuple[Path, dict[str, bytes]]:
    """A folder of someone's files named as a store entry's would be, and their contents."""
    victim = root / "victim"
    victim.mkdir()
    files = {name: f"precious {name}".encode() for name in
             ("settings.json", "settings.pbtxt", "settings.pb")}
    for name, data in files.items():
        (victim / name).write_bytes(data)
    return victim, files


def plant_entry(store: Path, fingerprint_folder: str, name: str, **fields) -> Path:
    """Metadata another user wrote into the store (any fields they like)."""
    meta = {"fingerprint": fingerprint_folder, "entry_id": name, "jax": JAX, "jaxlib": JAX,
            "device_kind": KIND, "device_count": 1, "created": "2020-01-01T00:00:00+00:00",
            "source": "planted", "module": "", "instructions": 1} | fields
    folder = store / "profiles" / fingerprint_folder
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(meta))
    return path


# --- 1. store metadata is never trusted as a path ------------------------------------------------

def test_a_planted_entry_id_never_deletes_outside_the_store(tmp_path):
    store = tmp_path / "shared" / "store"
    assert add(store, cwd=tmp_path).returncode == 0
    victim, files = victim_folder(tmp_path)
    fp = sorted(p.name for p in (store / "profiles").iterdir())[0]
    # From STORE/profiles/<fp>/ four levels up is tmp_path: victim/settings.* would be trimmed
    # (the oldest of the module's entries) by the next add's default keep:3, or by prune.
    traversal = os.path.relpath(victim / "settings", store / "profiles" / fp)
    planted = plant_entry(store, fp, "evil", entry_id=traversal)
    for args in ((["--policy", "replace"]), ()):
        proc = add(store, *args, cwd=tmp_path)
        no_traceback(proc)
        assert proc.returncode == 0, proc.stderr.decode()
        assert {p.name: p.read_bytes() for p in victim.iterdir()} == files
    proc = run_pgle("store", "prune", str(store), "--keep-last", "1", "--yes", cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr.decode()
    assert {p.name: p.read_bytes() for p in victim.iterdir()} == files
    # One warning names the file it skipped; the file itself is left for a human.
    warnings = [line for line in pgle_lines(proc) if "warning" in line]
    assert len(warnings) == 1 and str(planted) in warnings[0] and "not its file's name" in warnings[0]
    assert planted.exists()


def test_a_planted_fingerprint_never_writes_outside_the_view(tmp_path):
    store = tmp_path / "store"
    assert add(store, cwd=tmp_path).returncode == 0
    home = tmp_path / "home"  # the victim's folder beside the view they ask for
    home.mkdir()
    fp = sorted(p.name for p in (store / "profiles").iterdir())[0]
    good = next((store / "profiles" / fp).glob("*.json"))
    meta = json.loads(good.read_text())
    # From the view's temporary folder (beside the view), "../home/bashrc" is the victim's
    # home/bashrc.pbtxt; from STORE/profiles/, it is STORE/home/bashrc/: where the attacker
    # puts the profile the view would copy.
    meta |= {"fingerprint": "../home/bashrc", "entry_id": meta["entry_id"][:-1] + "0"}
    (store / "home" / "bashrc").mkdir(parents=True)
    shutil.copy(good.with_suffix(".pbtxt"), store / "home" / "bashrc" / f"{meta['entry_id']}.pbtxt")
    planted = good.parent / f"{meta['entry_id']}.json"
    planted.write_text(json.dumps(meta))
    proc = run_pgle("store", "get", str(store), str(tmp_path / "view"), "--device-kind", KIND,
                    "--jax", JAX, cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr.decode()
    assert list(home.iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "view").iterdir()) == \
        sorted(p.name for p in REFERENCE.glob("*.pbtxt"))
    warnings = [line for line in pgle_lines(proc) if line.startswith("pgle: warning:")]
    assert len(warnings) == 1 and str(planted) in warnings[0] and "is not its folder's" in warnings[0]


def test_a_link_in_the_store_is_never_followed(tmp_path):
    store = tmp_path / "store"
    assert add(store, cwd=tmp_path).returncode == 0
    secret = tmp_path / "private.pbtxt"
    secret.write_text('costs { name: "my.secret.op" cost_us: 1 }\n')
    os.chmod(secret, 0o600)
    fp = sorted(p.name for p in (store / "profiles").iterdir())[0]
    entry = next((store / "profiles" / fp).glob("*.pbtxt"))
    entry.unlink()
    entry.symlink_to(secret)  # another user swapped an entry's profile for a link
    proc = run_pgle("store", "get", str(store), str(tmp_path / "view"), "--device-kind", KIND,
                    "--jax", JAX, cwd=tmp_path)
    no_traceback(proc)
    assert proc.returncode == 2 and "symbolic link" in pgle_lines(proc)[-1], proc.stderr.decode()
    assert not (tmp_path / "view").exists()
    assert "my.secret.op" not in "".join(p.read_text() for p in tmp_path.rglob("*.pbtxt")
                                         if p != secret and not p.is_symlink())


# --- 5. STORE/.lock ------------------------------------------------------------------------------

@pytest.mark.unprivileged
def test_a_planted_lock_link_is_refused_and_the_target_untouched(tmp_path):
    store = tmp_path / "store"
    assert add(store, cwd=tmp_path).returncode == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("my notes")
    os.chmod(victim, 0o600)
    dangling = tmp_path / "created-by-pgle"
    for target in (victim, dangling):
        (store / ".lock").unlink()
        (store / ".lock").symlink_to(target)
        proc = add(store, cwd=tmp_path)
        no_traceback(proc)
        assert proc.returncode == 2, proc.stderr.decode()
        line = pgle_lines(proc)[-1]
        assert "store lock file" in line and "symbolic link" in line
    assert victim.read_text() == "my notes" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert not dangling.exists()


@pytest.mark.unprivileged
@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere (CI reruns "
                                              "`-m unprivileged` as a non-root user)")
def test_a_lock_file_this_user_cannot_write_still_locks(tmp_path):
    """Another user's lock file (0644, theirs): flock needs only a read descriptor. Run as the
    unprivileged user, a file it cannot write is what another user's is to it."""
    store = tmp_path / "store"
    assert add(store, cwd=tmp_path).returncode == 0
    os.chmod(store / ".lock", 0o444)  # as another user's 0644 is to this one
    proc = add(store, "--policy", "replace", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()


# --- 6. a bad entry, a full disk, a kill -9, a trim under a reader ------------------------------

def test_a_damaged_entry_is_skipped_with_one_warning(tmp_path):
    store = tmp_path / "store"
    assert add(store, cwd=tmp_path).returncode == 0
    fp = sorted(p.name for p in (store / "profiles").iterdir())[0]
    good = next((store / "profiles" / fp).glob("*.json"))
    meta = json.loads(good.read_text()) | {"created": "yesterday"}
    bad = good.parent / f"{meta['entry_id'][:-1]}0.json"
    meta["entry_id"] = bad.stem
    bad.write_text(json.dumps(meta))
    commands = [["store", "ls", str(store)],
                ["store", "prune", str(store), "--keep-last", "1"],
                ["store", "prune", str(store), "--older-than", "3650d", "--yes"],
                ["store", "get", str(store), str(tmp_path / "view"), "--device-kind", KIND,
                 "--jax", JAX],
                ["store", "add", str(store), str(REFERENCE), "--device-kind", KIND, "--jax", JAX]]
    for argv in commands:
        proc = run_pgle(*argv, cwd=tmp_path)
        no_traceback(proc)
        assert proc.returncode == 0, (argv, proc.stderr.decode())
        warnings = [line for line in pgle_lines(proc) if line.startswith("pgle: warning:")]
        assert len(warnings) == 1 and str(bad) in warnings[0] and "'yesterday' is not a time" in \
            warnings[0], (argv, warnings)
    assert len(list((tmp_path / "view").iterdir())) == len(list(REFERENCE.glob("*.pbtxt")))


def _no_temp_files(store: Path) -> None:
    assert not [p for p in store.rglob("*") if p.name.endswith(".tmp")]


def test_store_add_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path):
    with small_filesystem(tmp_path / "fs", size_kib=1024) as fs:
        store = fs / "store"
        assert add(store, cwd=tmp_path).returncode == 0
        before = sorted(p.name for p in store.rglob("*"))
        fill(fs)
        proc = add(store, "--jax", "0.11.0", cwd=tmp_path)
        no_traceback(proc)
        assert proc.returncode == 1, proc.stderr.decode()
        lines = pgle_lines(proc)
        assert len(lines) == 1 and "No space left on device" in lines[0] and "Free some space" in lines[0]
        _no_temp_files(store)
        (fs / "filler").unlink()
        # What the failed add left is no entry, and no orphan once the next add ran.
        assert add(store, "--jax", "0.11.0", cwd=tmp_path).returncode == 0
        names = sorted(p.name for p in store.rglob("*"))
        assert set(before) <= set(names) and len(names) == len(before) + 2 * len(list(REFERENCE.glob("*")))


def test_store_add_on_a_read_only_mount_is_one_line(tmp_path):
    with small_filesystem(tmp_path / "fs", size_kib=1024) as fs:
        store = fs / "store"
        assert add(store, cwd=tmp_path).returncode == 0
        done = subprocess.run(["mount", "-o", "remount,ro", str(fs)], capture_output=True, text=True)
        assert done.returncode == 0, f"cannot remount the test's tmpfs read-only: {done.stderr}"
        proc = add(store, "--jax", "0.11.0", cwd=tmp_path)
        no_traceback(proc)
        assert proc.returncode == 1, proc.stderr.decode()
        lines = pgle_lines(proc)
        assert len(lines) == 1 and "Read-only file system" in lines[0] and "read-only" in lines[0], lines
        _no_temp_files(store)
        # Reading a read-only store works: the reader's lock is optional where it cannot be made.
        proc = run_pgle("store", "get", str(store), str(tmp_path / "view"), "--device-kind", KIND,
                        "--jax", JAX, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr.decode()


def test_store_add_past_ulimit_f_says_so_not_free_space(tmp_path):
    store = tmp_path / "store"
    assert add(store, cwd=tmp_path).returncode == 0
    big = tmp_path / "big"
    big.mkdir()
    from pgle.profiles.files import write_profile

    write_profile(Profile([(f"fusion.{i}", float(i)) for i in range(5000)]), big / f"{FP[0]}.pbtxt")
    # ulimit -f 64: 64 KiB (bash counts 1024-byte blocks); Python ignores SIGXFSZ, so the write
    # gets EFBIG.
    proc = subprocess.run(["bash", "-c", 'ulimit -f 64 && exec "$@"', "bash", sys.executable, "-m",
                           "pgle", "store", "add", str(store), str(big), "--device-kind", KIND],
                          cwd=tmp_path, env=pgle_env(), capture_output=True)
    no_traceback(proc)
    assert proc.returncode == 1, proc.stderr.decode()
    lines = pgle_lines(proc)
    assert len(lines) == 1 and "File too large" in lines[0] and "ulimit -f" in lines[0], lines
    assert "free" not in lines[0].lower()
    _no_temp_files(store)
    assert not (store / "profiles" / FP[0]).exists() or \
        not list((store / "profiles" / FP[0]).glob("*.json"))


def test_a_writer_killed_between_profile_and_metadata_leaves_no_orphan(tmp_path):
    store = tmp_path / "store"
    assert add(store, cwd=tmp_path).returncode == 0
    killed = subprocess.run([sys.executable, str(TESTS / "helpers" / "store_killed_writer.py"),
                             str(store), FP[0]], env=pgle_env(), capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    leftovers = list((store / "profiles" / FP[0]).iterdir())
    assert [p.suffix for p in leftovers] == [".pbtxt"]  # the profile without its metadata
    proc = add(store, "--jax", "0.11.0", cwd=tmp_path)  # another module, another key
    assert proc.returncode == 0, proc.stderr.decode()
    assert not (store / "profiles" / FP[0]).exists() or list((store / "profiles" / FP[0]).iterdir()) == []
    assert any("interrupted writer left behind" in line for line in pgle_lines(proc))


def test_store_get_never_fails_while_another_process_trims(tmp_path):
    store = tmp_path / "store"
    env = pgle_env()
    writer = [sys.executable, str(TESTS / "helpers" / "store_writer.py"), str(store), "0"]
    subprocess.run([*writer, "1", "replace", KIND], env=env, check=True)
    trimmer = subprocess.Popen([*writer, "150", "replace", KIND], env=env)
    reader = subprocess.run([sys.executable, str(TESTS / "helpers" / "store_reader.py"), str(store),
                             str(tmp_path / "view"), "150"], env=env, capture_output=True, text=True)
    trimmer.wait(timeout=600)
    assert trimmer.returncode == 0
    assert reader.returncode == 0 and reader.stdout.split() == ["failures", "0"], reader.stderr


# --- 2. directory outputs: --force replaces only pgle's own -------------------------------------

def test_store_get_never_replaces_the_store_or_a_users_folder(tmp_path):
    store = tmp_path / "store"
    assert add(store, cwd=tmp_path).returncode == 0
    before = sorted(str(p) for p in store.rglob("*"))
    get = ("--device-kind", KIND, "--jax", JAX, "--force")
    for out, words in ((store, "is the input"), (store / "view", "is inside the input")):
        proc = run_pgle("store", "get", str(store), str(out), *get, cwd=tmp_path)
        no_traceback(proc)
        assert proc.returncode == 2 and words in pgle_lines(proc)[0], proc.stderr.decode()
        assert sorted(str(p) for p in store.rglob("*")) == before
    mine = tmp_path / "work"
    mine.mkdir()
    (mine / "thesis.tex").write_text("three years")
    proc = run_pgle("store", "get", str(store), str(mine), *get, cwd=tmp_path)
    assert proc.returncode == 2 and "thesis.tex" in pgle_lines(proc)[0] and \
        "would be lost" in pgle_lines(proc)[0]
    assert (mine / "thesis.tex").read_text() == "three years"
    # An earlier view is pgle's own: --force replaces it.
    view = tmp_path / "view"
    assert run_pgle("store", "get", str(store), str(view), *get[:-1], cwd=tmp_path).returncode == 0
    assert run_pgle("store", "get", str(store), str(view), *get, cwd=tmp_path).returncode == 0


# --- 8, 9: what the commands print ---------------------------------------------------------------

def test_store_ls_puts_the_list_on_stdout_with_escapes_shown(tmp_path):
    store = tmp_path / "store"
    st = ProfileStore(store, create=True)
    st.add(FP[0], Profile([("fusion.1", 1.0)]), jax=JAX, jaxlib=JAX, device_kind=KIND,
           device_count=8, source="nightly \x1b]0;owned\x07\x1b[2J", module="jit_\x1b[31mstep")
    proc = run_pgle("store", "ls", str(store), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    rows = out.splitlines()
    assert rows[0].split()[:3] == ["FINGERPRINT", "ENTRY", "JAX"] and len(rows) == 2
    assert rows[1].startswith(FP[0]) and "\x1b" not in out + proc.stderr.decode()
    assert "jit_\\x1b[31mstep" in rows[1] and "nightly \\x1b]0;owned\\x07" in rows[1]
    assert pgle_lines(proc) == [f"pgle: 1 profile of 1 module in {store}"]


def test_store_prune_previews_unless_yes_and_takes_durations(tmp_path):
    store = tmp_path / "store"
    for _ in range(2):
        assert add(store, "--policy", "keep:5", cwd=tmp_path).returncode == 0
    count = len(list(store.rglob("*.json")))
    proc = run_pgle("store", "prune", str(store), "--keep-last", "1", cwd=tmp_path)
    assert proc.returncode == 0 and len(list(store.rglob("*.json"))) == count
    assert any("would remove 6 profiles" in line and "pass --yes" in line for line in pgle_lines(proc))
    for bad in ("7", "soon"):
        proc = run_pgle("store", "prune", str(store), "--older-than", bad, cwd=tmp_path)
        assert proc.returncode == 2 and "is not a duration" in pgle_lines(proc)[0]
    proc = run_pgle("store", "prune", str(store), "--older-than", "12h", "--yes", cwd=tmp_path)
    assert proc.returncode == 0 and len(list(store.rglob("*.json"))) == count  # all newer
    proc = run_pgle("store", "prune", str(store), "--keep-last", "1", "--yes", cwd=tmp_path)
    assert proc.returncode == 0 and len(list(store.rglob("*.json"))) == count // 2


def test_copies_never_get_wider_permissions_than_their_source(tmp_path):
    """A store view on another filesystem is a copy, and so is a profile's content-addressed
    copy: a private (0600) source stays private."""
    from pgle.profiles.files import content_addressed_copy, load_profile_source

    store = tmp_path / "store"
    assert add(store, cwd=tmp_path).returncode == 0
    for entry in store.rglob("*.pbtxt"):
        os.chmod(entry, 0o600)
    with small_filesystem(tmp_path / "other-fs", size_kib=2048) as fs:  # links fail across filesystems
        proc = run_pgle("store", "get", str(store), str(fs / "view"), "--device-kind", KIND,
                        "--jax", JAX, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr.decode()
        modes = {stat.S_IMODE(p.stat().st_mode) for p in (fs / "view").iterdir()}
        assert modes == {0o600}
    private = tmp_path / "p.pbtxt"
    private.write_text('costs { name: "fusion.1" cost_us: 1 }\n')
    os.chmod(private, 0o600)
    copy = content_addressed_copy(load_profile_source(private), tmp_path / "copies")
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600


def test_no_name_climbs_out_of_a_shared_folder(tmp_path):
    """Every operation in a shared folder takes one path component: `..` (or `.`, a `/`) is
    refused before any system call, so no name (a planted one, a computed one gone wrong)
    opens, stats or writes the folder around the store."""
    from pgle.errors import BadInput
    from pgle.shared_folders import OpenDir

    root = tmp_path / "store"
    root.mkdir()
    with OpenDir.open(root) as folder:
        for name in ("..", ".", "", "../store", "a/b"):
            with pytest.raises(BadInput, match="is not a file name"):
                folder.sub(name, create=True)
            with pytest.raises(BadInput, match="is not a file name"):
                folder.lstat(name)
            with pytest.raises(BadInput, match="is not a file name"):
                folder.create_exclusive(name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
