"""The run's log and events files are made by pgle itself, with O_EXCL|O_NOFOLLOW, just before
the launch: a file or link planted at either name after the run folder was checked (a shared
--run-dir another user can write) is refused, never appended to nor followed (issue 37's
independent mutants: the events file was not claimed)."""

from __future__ import annotations

import os

import pytest

from pgle.errors import BadInput
from pgle.launch.runfolder import EVENTS_NAME, LOG_NAME, RunFolder


@pytest.mark.parametrize("name", [LOG_NAME, EVENTS_NAME])
@pytest.mark.parametrize("planted", ["file", "link"])
def test_a_file_planted_after_the_check_is_refused_at_the_claim(tmp_path, name, planted):
    target = tmp_path / "victim.txt"
    target.write_text("not pgle's\n")
    folder = RunFolder.create("run", str(tmp_path / "shared"))
    # Planted between the folder's creation and the launch.
    spot = folder.path / name
    if planted == "link":
        os.symlink(target, spot)
    else:
        spot.write_text("planted\n")
    with pytest.raises(BadInput) as e:
        folder.claim_files()
    assert e.value.message == f"run folder {folder.path} already holds a run ({name})."
    assert e.value.hint == "Pick an empty --run-dir."
    assert target.read_text() == "not pgle's\n"
    assert planted == "link" or spot.read_text() == "planted\n"
