"""Another user's live prewarm is live (issue 37: taken as dead, prune went ahead under it).
A run in the cache manifest whose process belongs to another user cannot be signalled
(os.kill(pid, 0) raises PermissionError): it is alive, and `cache prune --yes` refuses. The
pruning user here is a real second user (a forked process that dropped root's uid: the
interpreter cannot be started as that user, /root being 0700), the live run a real process of
root's."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

import pytest

from helpers.users import other_user
from pgle import api
from pgle.cache import manifest
from pgle.errors import PgleError


def _prune_as(user: str, cache: str) -> tuple[str, str]:
    """(outcome, message) of `cache prune --yes` run by `user` in a forked child."""
    api.cache_prune(cache, older_than="0s", yes=False)  # imports everything while still root
    pw = pwd.getpwnam(user)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to the other user, prune, report through the pipe
        code = 0
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            try:
                api.cache_prune(cache, older_than="0s", yes=True)
                out = ("pruned", "")
            except PgleError as e:
                out = ("refused", str(e))
            os.write(w, json.dumps(out).encode())
        except BaseException as e:
            os.write(w, json.dumps(("crashed", repr(e))).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    return tuple(json.loads(data))


@pytest.fixture
def shared_root():
    """A folder both users reach (tmp_path's parents are root's 0700)."""
    root = tempfile.mkdtemp(prefix="pgle-prune-")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_a_live_run_of_another_user_stops_prune(shared_root):
    user = other_user()
    if sys.platform != "linux":
        pytest.skip("setuid in a forked child: Linux")
    root = shared_root
    os.chmod(root, 0o777)
    cache = os.path.join(root, "cache")
    os.mkdir(cache)
    os.chmod(cache, 0o777)
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # root's run
    try:
        def add(data):
            run = manifest.new_run("train.py", None)
            run["pid"] = owner.pid
            data.setdefault("runs", []).append(run)

        manifest.update(cache, add)
        for name in os.listdir(cache):
            os.chmod(os.path.join(cache, name), 0o666)
        outcome, message = _prune_as(user, cache)
        assert outcome == "refused", (outcome, message)
        assert f"pid {owner.pid}" in message and "prune after it finishes" in message
    finally:
        owner.kill()
        owner.wait()
    # The run's process gone: the same user's prune goes ahead.
    assert _prune_as(user, cache)[0] == "pruned"
