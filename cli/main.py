"""`pgle`'s entry point.

Everything, `--help` included, goes through click (cli/group.py), which imports each command's
module only when that command runs: a new command needs one row in cli/commands.py and nothing else.
(Issue 24 retired the stored `--help` text of issue 16: 30-70 ms a call was not worth a
generated source file that silently left new commands out.)
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    from pgle.launch.streams import reserve_standard_fds

    # First: a closed stdout/stderr must not become the next file pgle opens.
    reserve_standard_fds()
    try:
        os.getcwd()
    except OSError as e:  # deleted under the shell (ENOENT), or no longer searchable
        sys.stderr.write(
            f"pgle: error: the current directory is gone or unreadable "
            f"({e.strerror}): cd to an existing folder and rerun.\n"
        )
        sys.exit(2)
    from .group import run

    run()


def __getattr__(name: str):
    # `from pgle.cli.main import cli` (tests, docs/gen_cli_reference.py) without this module
    # importing click at start-up.
    if name in ("cli", "LazyGroup"):
        from . import group

        return getattr(group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
