"""A file already at a name pgle creates is never reused (issue 37: O_EXCL dropped from the
shared-folder writer survived every test; O_NOFOLLOW alone still refuses links, not files).
Whoever planted the file keeps owning what pgle would write into it."""

from __future__ import annotations

import os

import pytest

from helpers.pgle_testing import run_pgle
from pgle.shared_folders import create_exclusive, link_or_copy


def test_pgles_gitignore_never_rewrites_one_already_there(project):
    """`.pgle/.gitignore` is pgle's only when pgle made it: the user's own stays byte for byte."""
    (project / ".pgle").mkdir()
    theirs = "# the user's own rules\n!keep-this-run\n"
    (project / ".pgle" / ".gitignore").write_text(theirs)
    script = project / "hello.py"
    script.write_text("print('hello')\n")
    profile = project / "p.pbtxt"
    profile.write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    proc = run_pgle("run", "--profile", str(profile), str(script), cwd=project, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert (project / ".pgle" / ".gitignore").read_text() == theirs
    assert len(list((project / ".pgle" / "runs").iterdir())) == 1


def test_a_fresh_folder_gets_pgles_gitignore(project):
    script = project / "hello.py"
    script.write_text("print('hello')\n")
    profile = project / "p.pbtxt"
    profile.write_text('costs { name: "fusion.1" cost_us: 1.0 }\n')
    proc = run_pgle("run", "--profile", str(profile), str(script), cwd=project, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert (project / ".pgle" / ".gitignore").read_text().endswith("\n*\n")


def test_a_planted_file_is_never_opened_for_writing(tmp_path):
    planted = tmp_path / "planted"
    planted.write_bytes(b"the planter's bytes")
    with pytest.raises(FileExistsError):
        create_exclusive(planted)
    assert planted.read_bytes() == b"the planter's bytes"


def test_a_copy_never_lands_in_a_planted_file(tmp_path):
    """link_or_copy (a store view's files): a file planted at the destination is refused, not
    filled with the profile (its planter could rewrite the profile XLA then reads)."""
    src = tmp_path / "src.pbtxt"
    src.write_bytes(b'costs { name: "a" cost_us: 1.0 }\n')
    dst = tmp_path / "dst.pbtxt"
    dst.write_bytes(b"planted")
    with pytest.raises(FileExistsError):
        link_or_copy(src, dst)
    assert dst.read_bytes() == b"planted" and os.stat(dst).st_ino != os.stat(src).st_ino
