"""pgle's own standard streams: closed at start (`pgle run ... >&-`), or failing later (a full
disk, `>/dev/full`, a reader that went away).

A closed stdout or stderr must not become some other file: the next `open` would get fd 1 or
2, and the workload's output would then be written into it (a lock file, the run log).
`reserve_standard_fds()`, called first thing by the CLI, puts /dev/null on each closed one and
remembers it. `say()` writes one of pgle's lines on whichever of the two still works; pgle
never fails, and never loses the workload's output, because a stream does not.
"""

from __future__ import annotations

import errno
import os
import sys

STREAM_NAMES = {0: "stdin", 1: "stdout", 2: "stderr"}

# fds that were closed when pgle started (now /dev/null), and pgle's own text streams that
# failed since (cli/output.py drops them): fd -> why.
closed_at_start: set[int] = set()
failed: dict[int, str] = {}
said: set[str] = set()  # keys of lines said once per process (pgle.launch.pumps)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def reserve_standard_fds() -> set[int]:
    """Open /dev/null on each of fds 0-2 that is closed; remember which. Idempotent."""
    for fd in (0, 1, 2):
        if fd in closed_at_start or _is_open(fd):
            continue
        null = os.open(os.devnull, os.O_RDWR)  # the lowest free fd: this one, or a lower one
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        os.set_inheritable(fd, True)
        closed_at_start.add(fd)
        name = STREAM_NAMES[fd]
        if getattr(sys, name, None) is None:  # Python found the fd closed at start-up
            setattr(
                sys,
                name,
                open(  # noqa: SIM115  kept open for the life of the process
                    fd,
                    "r" if fd == 0 else "w",
                    closefd=False,
                    errors="backslashreplace",
                ),
            )
    return closed_at_start


def usable(fd: int) -> bool:
    return fd not in closed_at_start and fd not in failed


def describe(e: OSError) -> str:
    name = errno.errorcode.get(e.errno or 0, "")
    return f"{e.strerror or e}" + (f" ({name})" if name else "")


def write_line(fd: int, text: str) -> bool:
    """One line on `fd`, unbuffered (nothing is left in a buffer to fail again at exit)."""
    data = text.encode("utf-8", "replace")
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        return False
    return True


def say(text: str) -> bool:
    """pgle's line on stderr, or on stdout when stderr is closed or failing. False: no stream
    took it."""
    line = text if text.endswith("\n") else text + "\n"
    return any(usable(fd) and write_line(fd, line) for fd in (2, 1))
