"""The user's workload: a Python script, `-m module`, or any command (a shell wrapper, `python`
itself, a torchrun-style launcher), and its argv (untouched).

A script or module runs in-process under pgle's harness (pgle.launch.harness, through runpy); a
command runs as it is, and the harness travels by environment into every Python process below
it that imports jax (command mode, pgle/launch/boot/sitecustomize.py).

`pgle CMD [OPTIONS] WORDS`, as the CLI and the API (`pgle.run(*words, ...)`) take them:
- `-m MODULE ARGS...` (or `-- -m MODULE ARGS...`): a module;
- `FILE ARGS...` naming a Python script (`.py`, a `python` shebang, or any file that is not
  a shell script or program): a script;
- `FILE ARGS...` naming a shell script (`.sh`/`.bash`, or another shebang) or a program:
  a command (the file itself when executable, else its interpreter with it);
- `NAME ARGS...` where NAME is no file but a program on PATH (`python`, `bash`, `torchrun`,
  `srun`): a command.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shlex
import shutil

from pgle.errors import BadInput

_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
SHELL_SUFFIXES = (".sh", ".bash", ".zsh", ".ksh")


@dataclasses.dataclass(frozen=True)
class Workload:
    script: str | None  # absolute path of the script, or None with `module` or `command`
    module: str | None
    args: tuple[str, ...]
    # Command mode: the argv pgle starts as it is (`args` is then its tail, for display).
    command: tuple[str, ...] = ()

    @classmethod
    def from_cli(cls, module: str | None, words: tuple[str, ...] | list[str]) -> Workload:
        """`SCRIPT ARGS...`, `COMMAND ARGS...` or, with `-m MODULE`, just `ARGS...`."""
        words = list(words)
        if module is None and len(words) >= 2 and words[0] == "-m":
            module, words = words[1], words[2:]  # `-- -m MODULE ARGS`
        if module:
            if not _MODULE_NAME.match(module):
                raise BadInput(f"-m {module!r} is not a Python module name.")
            top = module.split(".")[0]
            # Look where `python -m` would: the current directory first.
            if importlib.util.find_spec(top) is None and not _found_in_cwd(top):
                raise BadInput(
                    f"no module named {top!r} (for -m {module}).",
                    hint="Run pgle from the folder where `python -m` finds it.",
                )
            return cls(None, module, tuple(words))
        if not words:
            raise BadInput(
                "no workload given.",
                hint="Usage: pgle COMMAND [OPTIONS] SCRIPT [-- ARGS], or "
                "pgle COMMAND [OPTIONS] -- PROGRAM [ARGS] (bash run.sh, "
                "python -m pkg, torchrun ...).",
            )
        first, *args = words
        if not os.path.exists(first):
            program = shutil.which(first) if os.sep not in first else None
            if program is not None:
                return cls(None, None, tuple(args), (first, *args))
            if os.sep in first or "." in os.path.basename(first):
                raise BadInput(f"script {first} does not exist.")
            raise BadInput(f"{first} is neither a file nor a program on PATH.")
        if not os.path.isfile(first):
            raise BadInput(f"script {first} is not a file.")
        if not os.access(first, os.R_OK):
            raise BadInput(f"script {first} is not readable.")
        path = os.path.abspath(first)
        interpreter = _interpreter(path)
        if interpreter is None:
            return cls(path, None, tuple(args))
        return cls(None, None, tuple(args), (*interpreter, *args))

    def describe(self) -> str:
        """The command line as pgle shows it: secrets redacted (pgle.redact)."""
        from pgle.redact import redact_args

        if self.command:
            return " ".join(shlex.quote(w) for w in redact_args(list(self.command)))
        head = f"-m {self.module}" if self.module else self.script
        return " ".join([head or "", *redact_args(self.args)])

    def argv(self) -> list[str]:
        """What `sys.argv` would hold under plain `python` (a command: its argv)."""
        if self.command:
            return list(self.command)
        return [self.script or self.module or "", *self.args]


def _interpreter(path: str) -> list[str] | None:
    """None for a Python script; else how a command runs the file: itself when executable,
    else the interpreter its shebang names (or `sh` for a shell script without one)."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    executable = os.access(path, os.X_OK)
    if head.startswith(b"#!"):
        line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
        words = line.split()
        if not words:
            return None
        # `#!/usr/bin/python3`, `#!/usr/bin/env python3`, `#!/usr/bin/env -S python3 -u`
        if any(os.path.basename(w).startswith("python") for w in words):
            return None  # a Python script: the harness runs it in-process
        return [path] if executable else [*words, path]
    if head.startswith(b"\x7fELF"):
        if not executable:
            raise BadInput(f"{path} is a program but not executable.", hint=f"chmod +x {path}")
        return [path]
    if path.endswith(SHELL_SUFFIXES):
        return [path] if executable else ["sh", path]
    return None


def _found_in_cwd(top: str) -> bool:
    return os.path.isdir(os.path.join(os.getcwd(), top)) or os.path.isfile(
        os.path.join(os.getcwd(), top + ".py")
    )
