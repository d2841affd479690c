"""`pgle`'s entry point and its command table.

`pgle --help` and `pgle COMMAND --help` print help text stored in cli/help_text.py when
click would render exactly that text (issue 16): importing click costs about a third of a bare
interpreter's start-up, more than the goal leaves for it. The stored text is generated from
click's own rendering (`python3 docs/gen_help_text.py`) and tests/cli/test_help_text.py fails
when it differs from what click renders now. Everything else goes through click (cli/group.py).
"""

from __future__ import annotations

import os
import sys

# name -> (module under cli/, function, one-line help shown by `pgle --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "collect": ("pgle.cli.manual", "collect", "Profile a workload and extract the PGLE profile."),
    "run": ("pgle.cli.manual", "run", "Run a workload with a PGLE profile and verify XLA used it."),
    "tune": ("pgle.cli.manual", "tune", "Collect, then run with the profile: one verdict, with step times."),
    "verify": ("pgle.cli.manual", "verify", "Build the PGLE verdict from a saved log."),
    "doctor": ("pgle.cli.doctor", "doctor", "Check jax, GPU, CUPTI, nsys, XLA_FLAGS and the cache before a job."),
    "flags": ("pgle.cli.flags", "flags", "Explain an XLA_FLAGS string: meaning, defaults, status."),
    "view": ("pgle.cli.view", "view", "Open a run folder's kept trace in XProf."),
    "cache": ("pgle.cli.cache", "cache", "List, total and prune a JAX persistent compilation cache."),
    "auto": ("pgle.cli.auto", "auto", "Run with JAX's auto PGLE and verify each module was re-optimized."),
    "prewarm": ("pgle.cli.prewarm", "prewarm", "Fill a compilation cache with PGLE-optimized executables."),
    "nsys": ("pgle.cli.nsys", "nsys", "Run under Nsight Systems; verify it loaded the prewarmed PGLE modules."),
    "inspect": ("pgle.cli.profiles", "inspect", "Show what a profile holds: counts, top costs, categories."),
    "diff": ("pgle.cli.profiles", "diff", "Compare two profiles: missing instructions, largest changes."),
    "merge": ("pgle.cli.profiles", "merge", "Merge profiles of several runs or ranks (jaxlib's percentile rule)."),
    "convert": ("pgle.cli.profiles", "convert", "Convert profiles (binary/text, file/directory) or a trace."),
    "report": ("pgle.cli.report", "report", "What PGLE bought, and why: one HTML/JSON report from run folders."),
    "runs": ("pgle.cli.runs", "runs", "List and prune the run folders under .pgle/runs (logs, traces)."),
    "store": ("pgle.cli.store", "store", "A fingerprint-keyed profile store for recurring jobs: ls, add, get, prune."),
}


# Commands whose trailing arguments are a workload (SCRIPT [-- ARGS]).
WORKLOAD_COMMANDS = {"collect", "run", "tune", "auto", "prewarm", "nsys"}
HELP_OPTIONS = ("-h", "--help")


def _click_help_width() -> int:
    """The width click's HelpFormatter picks: min(terminal columns, 80) - 2, at least 50.

    The columns as `shutil.get_terminal_size()` finds them (COLUMNS, then the terminal on
    stdout, else 80), written out because importing shutil (bz2, lzma, fnmatch) costs more than
    the rest of this path."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
        except (AttributeError, ValueError, OSError):
            columns = 80
    return max(min(columns, 80) - 2, 50)


def stored_help(args: list[str]) -> str | None:
    """The help text click would print for `pgle ARGS`, when it is stored and rendered at the
    width click would use now; None sends ARGS through click."""
    if not args or args[-1] not in HELP_OPTIONS or any(a.startswith("-") for a in args[:-1]):
        return None
    from pgle.cli import help_text

    if _click_help_width() != help_text.WIDTH:
        return None
    return help_text.TEXT.get(" ".join(args[:-1]))


def main():
    from pgle.launch.streams import reserve_standard_fds

    # First: a closed stdout/stderr must not become the next file pgle opens.
    reserve_standard_fds()
    text = stored_help(sys.argv[1:])
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
        sys.exit(0)
    try:
        os.getcwd()
    except OSError as e:  # deleted under the shell (ENOENT), or no longer searchable
        sys.stderr.write(f"pgle: error: the current directory is gone or unreadable "
                         f"({e.strerror}): cd to an existing folder and rerun.\n")
        sys.exit(2)
    from pgle.cli.group import run

    run()


def __getattr__(name: str):
    # `from pgle.cli.main import cli` (tests, docs/gen_cli_reference.py) keeps working without
    # this module importing click.
    if name in ("cli", "LazyGroup"):
        from pgle.cli import group

        return getattr(group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
