"""One exception family for every domain error, each with its exit code.

The CLI turns a PgleError into one `pgle: <message>` line and its exit code;
anything else is a bug and shows a traceback.

Messages name options as the command line spells them (`--min-coverage 2 is not between 0 and
1.`). pgle.api sets `keywords` on an error it raises to a Python caller, and `str(error)` then
names the keyword instead (`min_coverage 2 ...`, `force=True`); the CLI prints
`error.text(flags=True)`. A command quoted in backticks (`pgle collect --per-module`) keeps
its flags: it is a command to type.
"""

from __future__ import annotations

import re

# Documented exit codes (README "Exit codes"). A workload that fails makes pgle
# exit with the workload's own code; these are pgle's own.
EXIT_OK = 0
EXIT_ERROR = 1  # pgle could not do its job (empty profile, missing tool, ...)
EXIT_USAGE = 2  # bad input: options, missing files, corrupt profiles, bad flags
EXIT_NOT_VERIFIED = 3  # the workload succeeded but the evidence did not meet --require-*
# The stall watchdog stopped a workload that made no progress for too long (pgle.launch.stall);
# 124 as GNU timeout(1) exits when its time limit stopped a command.
EXIT_STALLED = 124
# (a verdict, not an exception: the command sets Report.exit_code and still prints its report)


class PgleError(Exception):
    """A failure pgle explains in one sentence."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # A flag in the message -> how the caller names that option (set by pgle.api).
        self.keywords: dict[str, str] = {}

    def text(self, *, flags: bool = False) -> str:
        """The message and its hint; `flags`: options as the command line spells them, else
        as the caller named them (`keywords`)."""
        text = f"{self.message} {self.hint}" if self.hint else self.message
        return text if flags or not self.keywords else keyword_names(text, self.keywords)

    def __str__(self) -> str:
        return self.text()

    def report_fields(self) -> dict[str, object]:
        """What the error report (`--json`, `--report`) carries beyond the message."""
        return {}


# A command in backticks (kept as it is), or a flag: `--name` or `-x`, not part of a longer word.
_FLAG_OR_QUOTE = re.compile(r"`[^`]*`|(?<![\w-])(--?[a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w-])")


def keyword_names(text: str, keywords: dict[str, str]) -> str:
    """`text` with each flag that `keywords` knows replaced by its keyword."""

    def name(m: re.Match[str]) -> str:
        flag = m.group(1)
        return keywords.get(flag, flag) if flag else m.group(0)

    return _FLAG_OR_QUOTE.sub(name, text)


class BadInput(PgleError):
    """The user's input is wrong; nothing was launched or written."""

    exit_code = EXIT_USAGE


class ProfileError(BadInput):
    """A profile file or directory is missing, unreadable or corrupt."""


class FlagError(BadInput):
    """XLA_FLAGS holds a flag XLA would abort on, or cannot be parsed."""


class Interrupted(PgleError):
    """pgle got SIGINT, SIGTERM or SIGHUP while the workload ran: it forwarded the signal, the
    workload has exited, and the command stops there (no later phase) with 128+N, whatever
    the workload's own exit code was."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


class Stalled(PgleError):
    """The workload made no progress for longer than its bound: pgle had every process write
    its Python stacks into the run folder, then stopped it (pgle.launch.stall)."""

    exit_code = EXIT_STALLED

    def __init__(self, message: str, execution: object = None):
        super().__init__(message)
        self.execution = execution  # pgle.launch.execution.Execution: what the run left
        self.fleet: dict[str, object] | None = None  # rank 0 of a job: pgle.jobs.fleet's

    def report_fields(self) -> dict[str, object]:
        """What the watchdog found, and where the stacks and the log are."""
        stall = getattr(self.execution, "stall", None)
        run = getattr(self.execution, "run", None)
        if stall is None or run is None:
            return {}
        out: dict[str, object] = {
            "stall": stall.to_dict(),
            "run_dir": str(run.path),
            "log_path": str(run.log),
        }
        fleet = self.fleet or {}
        if isinstance(fleet.get("stall"), dict):  # issue 36: the job's first stopped rank
            out["stall"] = {**stall.to_dict(), **fleet["stall"]}  # type: ignore[dict-item]
        if fleet.get("divergence"):
            out["divergence"] = fleet["divergence"]
        return out


def exists_error(message: str, kind: type[PgleError] | None = None) -> PgleError:
    """An output that is in the way (`message`: what and where): the CLI says `--force`, a
    Python caller `force=True` (pgle.profiles.files.write_profile and the other library
    functions)."""
    e = (kind or BadInput)(message, hint="Pass --force to replace it.")
    e.keywords = {"--force": "force=True"}
    return e
