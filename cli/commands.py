"""The command table: every `pgle` subcommand, the module that defines it, and its one-line help.

A new command needs one row here and nothing else (cli/group.py imports each command's module only
when that command runs). A module of its own so that the entry point (cli/main.py) and the click
group (cli/group.py) both read it without importing each other.
"""

from __future__ import annotations

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
