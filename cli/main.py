"""`pgle`'s entry point and its command table.

Everything, `--help` included, goes through click (cli/group.py), which imports each command's
module only when that command runs: a new command needs one row in COMMANDS and nothing else.
(Issue 24 retired the stored `--help` text of issue 16: 30-70 ms a call was not worth a
generated source file that silently left new commands out.)
"""

from __future__ import annotations

import os
import sys

# name -> (module under cli/, function, one-line help shown by `pgle --help`)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "collect": ("pgle.cli.manual", "collect", "Profile a workload and extract the PGLE profile."),
    "run": ("pgle.cli.manual", "run", "Run a workload with a PGLE profile and verify XLA used it."),
    "tune": (
        "pgle.cli.manual",
        "tune",
        "Collect, then run with the profile: one verdict, with step times.",
    ),
    "verify": ("pgle.cli.manual", "verify", "Build the PGLE verdict from a saved log."),
    "estimate": (
        "pgle.cli.estimate",
        "estimate",
        "Predict PGLE's gain with XLA:GPU's own compiler, without a GPU.",
    ),
    "doctor": (
        "pgle.cli.doctor",
        "doctor",
        "Check jax, GPU, CUPTI, nsys, XLA_FLAGS and the cache before a job.",
    ),
    "flags": ("pgle.cli.flags", "flags", "Explain an XLA_FLAGS string: meaning, defaults, status."),
    "view": ("pgle.cli.view", "view", "Open a run folder's kept trace in XProf."),
    "cache": (
        "pgle.cli.cache",
        "cache",
        "List, total and prune a JAX persistent compilation cache.",
    ),
    "auto": (
        "pgle.cli.auto",
        "auto",
        "Run with JAX's auto PGLE and verify each module was re-optimized.",
    ),
    "prewarm": (
        "pgle.cli.prewarm",
        "prewarm",
        "Fill a compilation cache with PGLE-optimized executables.",
    ),
    "nsys": (
        "pgle.cli.nsys",
        "nsys",
        "Run under Nsight Systems; verify it loaded the prewarmed PGLE modules.",
    ),
    "inspect": (
        "pgle.cli.profiles",
        "inspect",
        "Show what a profile holds: counts, top costs, categories.",
    ),
    "diff": (
        "pgle.cli.profiles",
        "diff",
        "Compare two profiles: missing instructions, largest changes.",
    ),
    "merge": (
        "pgle.cli.profiles",
        "merge",
        "Merge profiles of several runs or ranks (jaxlib's percentile rule).",
    ),
    "convert": (
        "pgle.cli.profiles",
        "convert",
        "Convert profiles (binary/text, file/directory) or a trace.",
    ),
    "report": (
        "pgle.cli.report",
        "report",
        "What PGLE bought, and why: one HTML/JSON report from run folders.",
    ),
    "runs": (
        "pgle.cli.runs",
        "runs",
        "List and prune the run folders under .pgle/runs (logs, traces).",
    ),
    "store": (
        "pgle.cli.store",
        "store",
        "A fingerprint-keyed profile store for recurring jobs: ls, add, get, prune.",
    ),
}


# Commands whose trailing arguments are a workload (SCRIPT [-- ARGS]).
WORKLOAD_COMMANDS = {"collect", "run", "tune", "auto", "prewarm", "nsys"}


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
    # importing click (cli/group.py imports this module's COMMANDS).
    if name in ("cli", "LazyGroup"):
        from . import group

        return getattr(group, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
