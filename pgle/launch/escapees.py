"""The workload's processes that left its process group (`setsid`, a daemon's double fork).

pgle signals the workload's process group; a process that started a session of its own is in
none of pgle's groups, and its parent may have exited (it is then init's child). Neither the
process tree nor the group finds it, so every launch marks its workload by environment:
TOKEN_VAR=<random> is in the environment the workload starts with, and every process it starts
inherits it. Linux keeps a process's initial environment readable in /proc/PID/environ (a
later `os.environ.pop` or `setsid` does not change it), so the processes of this user that
carry the token are the workload's, whatever their session, parent or group. A process that
execs with a cleared environment (`env -i`) drops the mark; it is the one case this misses.

Why not PR_SET_CHILD_SUBREAPER on pgle: orphans then reparent to pgle while it lives, but not
after `kill -9` of pgle, and a library caller (a notebook) would adopt, and have to reap, the
orphans of every other child it has. A pidfd set misses what was started between two scans.

`kill -9` of pgle: a small watcher process (`Watcher`, its own session, no pgle code) holds the
read end of a pipe only pgle writes to; EOF without pgle's "done" byte means pgle died, and the
watcher kills every marked process.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys

TOKEN_VAR = "PGLE_LAUNCH_TOKEN"
_ENVIRON_LIMIT = 1 << 20  # the most read of one process's environment


def new_token() -> str:
    return secrets.token_hex(16)


def marked(token: str, *, outside_group: int | None = None) -> list[int]:
    """The pids of this user's processes whose initial environment holds the token (pgle's
    own excluded); `outside_group`: only those not in that process group."""
    needle = f"\0{TOKEN_VAR}={token}\0".encode()
    uid, me = os.getuid(), os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read(_ENVIRON_LIMIT)
        except OSError:
            continue  # gone, or not ours
        # No mutant here: `in` for `not in` would signal every process of the user, the
        # mutation run's own and the machine's (tests/mutants/score.py, issue 37).
        if needle not in b"\0" + env:  # pragma: no mutate
            continue
        if outside_group is not None:
            try:
                if os.getpgid(pid) == outside_group:
                    continue
            except OSError:
                continue
        found.append(pid)
    return found


def signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


# The watcher: standard library only, run with -I -S (no site, no pgle import: fast, and
# nothing of the user's environment runs in it).
_WATCHER = r"""
import os, sys
fd, token = int(sys.argv[1]), sys.argv[2]
got = b""
while True:
    try:
        b = os.read(fd, 1)
    except InterruptedError:
        continue
    except OSError:
        b = b""
    if not b:
        break
    got += b
if got.endswith(b"d"):
    sys.exit(0)
needle = ("\0PGLE_LAUNCH_TOKEN=" + token + "\0").encode()
uid, me = os.getuid(), os.getpid()
for _ in range(3):
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat("/proc/" + name).st_uid != uid:
                continue
            with open("/proc/" + name + "/environ", "rb") as f:
                env = f.read(1 << 20)
            if needle in b"\0" + env:
                os.kill(int(name), 9)
        except OSError:
            pass
"""


class Watcher:
    """Kills the marked processes if pgle dies before `done()` (module docstring)."""

    def __init__(self, token: str):
        self.proc: subprocess.Popen[bytes] | None = None
        self.write_fd: int | None = None
        try:
            read_fd, self.write_fd = os.pipe()
        except OSError:
            return
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHER, str(read_fd), token],
                pass_fds=(read_fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # never in the terminal's group: Ctrl-C is not for it
                env={},
            )
        except OSError:
            os.close(self.write_fd)
            self.write_fd = None
        finally:
            os.close(read_fd)

    def done(self) -> None:
        """The launch is over: the watcher exits without killing anything."""
        if self.write_fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.write_fd, b"d")
            with contextlib.suppress(OSError):
                os.close(self.write_fd)
            self.write_fd = None
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            self.proc = None
