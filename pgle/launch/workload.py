"""The user's workload: a script or `-m module`, and its argv (untouched)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re

from pgle.errors import BadInput

_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclasses.dataclass(frozen=True)
class Workload:
    script: str | None  # absolute path of the script, or None with `module`
    module: str | None
    args: tuple[str, ...]

    @classmethod
    def from_cli(cls, module: str | None, words: tuple[str, ...] | list[str]) -> "Workload":
        """`SCRIPT ARGS...` or, with `-m MODULE`, just `ARGS...`."""
        words = list(words)
        if module:
            if not _MODULE_NAME.match(module):
                raise BadInput(f"-m {module!r} is not a Python module name.")
            top = module.split(".")[0]
            # Look where `python -m` would: the current directory first.
            if importlib.util.find_spec(top) is None and not _found_in_cwd(top):
                raise BadInput(f"no module named {top!r} (for -m {module}).",
                               hint="Run pgle from the folder where `python -m` finds it.")
            return cls(None, module, tuple(words))
        if not words:
            raise BadInput("no workload given.", hint="Usage: pgle COMMAND [OPTIONS] SCRIPT [-- ARGS].")
        script, *args = words
        if not os.path.exists(script):
            raise BadInput(f"script {script} does not exist.")
        if not os.path.isfile(script):
            raise BadInput(f"script {script} is not a file.")
        if not os.access(script, os.R_OK):
            raise BadInput(f"script {script} is not readable.")
        return cls(os.path.abspath(script), None, tuple(args))

    def describe(self) -> str:
        """The command line as pgle shows it: secrets redacted (pgle.redact)."""
        from pgle.redact import redact_args

        head = f"-m {self.module}" if self.module else self.script
        return " ".join([head or "", *redact_args(self.args)])

    def argv(self) -> list[str]:
        """What `sys.argv` would hold under plain `python`."""
        return [self.script or self.module or "", *self.args]


def _found_in_cwd(top: str) -> bool:
    return os.path.isdir(os.path.join(os.getcwd(), top)) or os.path.isfile(
        os.path.join(os.getcwd(), top + ".py"))
