"""One mutant: a realistic one-line bug, found in its file by its exact text (the format of both
lists, tests/mutants/independent.py and tests/mutants/mutants.py; one runner: independent.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    find: str
    replace: str
    why: str  # the bug a user would see
    tests: tuple[str, ...] = ()  # overrides AREAS[file]
    equivalent: str = ""  # why no test can tell it from the original

    @property
    def package(self) -> str:
        parts = Path(self.file).parts  # pgle/<package>/x.py or pgle/x.py
        if parts[1] == "commands":
            return "commands"
        return parts[1].removesuffix(".py") if len(parts) == 2 else parts[1]
