"""Parse, merge, render and lint `XLA_FLAGS` exactly as XLA reads it.

XLA (tsl parse_flags_from_env.cc, unchanged through jax 0.10) reads the
variable left to right: whitespace separates flags; `--name="v a l"` or
`--name='v'` quote a value (backslash escapes only inside double quotes);
`--name=''` is an empty value; parsing silently stops at the first token that
does not start with `-`; a value that does not start with `-` at all is the
name of a file holding the flags. A quote that is never closed makes the rest
of the string that flag's value (the loop runs to the end), so any flag
appended after it is silently lost: pgle refuses such a string.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import overload

from pgle.errors import FlagError
from pgle.xla import flag_table

_WS = " \t\r\n"
_NAME_CHARS = re.compile(r"[-_A-Za-z0-9]*")


@dataclasses.dataclass(frozen=True)
class Flag:
    name: str  # without leading dashes
    value: str | None  # None for a bare `--name`
    raw: str  # exactly as written by the user; pgle's own flags get a canonical form
    unterminated: bool = False  # its quoted value runs to the end of XLA_FLAGS

    @classmethod
    def make(cls, name: str, value: str | None) -> Flag:
        return cls(name, value, render_flag(name, value))


def render_flag(name: str, value: str | None) -> str:
    if value is None:
        return f"--{name}"
    if value == "":
        return f"--{name}=''"
    if any(c in value for c in _WS + "'\""):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'--{name}="{escaped}"'
    return f"--{name}={value}"


def join_words(words: Sequence[str]) -> str:
    """XLA_FLAGS text from words: one word is the string itself; several are one flag each, as a
    shell split them (a value with spaces is quoted again, `--name="a b"`)."""
    if len(words) == 1:
        return words[0]
    out = []
    for word in words:
        name, sep, value = word.partition("=")
        if sep and word.startswith("-") and any(c.isspace() for c in value):
            dashes = name[: len(name) - len(name.lstrip("-"))]  # kept: one dash is an error
            word = dashes + render_flag(name.lstrip("-"), value)[2:]
        out.append(word)
    return " ".join(out)


@dataclasses.dataclass
class XlaFlags:
    flags: list[Flag]
    # Text after the first token XLA cannot read; XLA ignores it silently.
    ignored_tail: str = ""
    # XLA_FLAGS named a file instead of holding flags.
    source_file: str | None = None

    @classmethod
    def parse(cls, text: str | None) -> XlaFlags:
        if not text:
            return cls([])
        # Whitespace alone is not empty to XLA: it reads it as a file name too.
        stripped = text.lstrip(_WS)
        if not stripped.startswith("-"):
            try:
                with open(text, encoding="utf-8", errors="replace") as f:
                    content = f.read()
            except OSError as e:
                raise FlagError(
                    f"XLA_FLAGS={text!r} does not start with '--', so XLA reads it as a file of "
                    f"flags, but it cannot be opened ({e.strerror}).",
                    hint="Export the flags themselves, e.g. XLA_FLAGS='--xla_dump_to=/tmp/d'.",
                ) from None
            # The file's text is parsed as flags, never as another file name.
            return cls(*_parse_string(content), source_file=text)
        return cls(*_parse_string(text))

    def get(self, name: str) -> Flag | None:
        """The flag XLA ends up using: the last occurrence wins."""
        for flag in reversed(self.flags):
            if flag.name == name:
                return flag
        return None

    @overload
    def value(self, name: str, default: str) -> str: ...
    @overload
    def value(self, name: str, default: None = None) -> str | None: ...
    def value(self, name: str, default: str | None = None) -> str | None:
        flag = self.get(name)
        if flag is None:
            return default
        return "true" if flag.value is None else flag.value

    def names(self) -> list[str]:
        return [f.name for f in self.flags]

    def render(self) -> str:
        # The unreadable tail stays last: XLA ignores it either way, and
        # anything placed after it would be ignored too.
        tail = [self.ignored_tail] if self.ignored_tail else []
        return " ".join([f.raw for f in self.flags] + tail)

    def merged(self, updates: dict[str, str | None]) -> tuple[XlaFlags, list[str]]:
        """pgle's flags merged into the user's: theirs keep their order and text.

        A user flag that pgle must set differently is replaced in place; the
        notices say which, in one line each.
        """
        flags = list(self.flags)
        notices = []
        for name, value in updates.items():
            new = Flag.make(name, value)
            positions = [i for i, f in enumerate(flags) if f.name == name]
            if not positions:
                flags.append(new)
                continue
            for i in positions:
                if flags[i].value != value:
                    notices.append(f"replacing your {flags[i].raw} with {new.raw}")
                    flags[i] = new
        return XlaFlags(flags, self.ignored_tail, self.source_file), notices

    def without(self, names: set[str]) -> XlaFlags:
        return XlaFlags(
            [f for f in self.flags if f.name not in names], self.ignored_tail, self.source_file
        )


def _parse_string(text: str) -> tuple[list[Flag], str]:
    flags: list[Flag] = []
    n = len(text)
    b = _skip_ws(text, 0)
    while b < n and text[b] == "-":
        name_end = _NAME_CHARS.match(text, b)
        assert name_end is not None  # `*`: it matches the empty string too
        e = name_end.end()
        dashed = text[b:e]
        if e + 1 < n and text[e] == "=" and text[e + 1] in "'\"":
            quote = text[e + 1]
            i = e + 2
            chars: list[str] = []
            while i < n and text[i] != quote:
                c = text[i]
                if quote == '"' and c == "\\" and i + 1 < n:
                    i += 1
                    c = text[i]
                chars.append(c)
                i += 1
            closed = i < n
            if closed:
                i += 1  # closing quote
            flags.append(Flag(dashed.lstrip("-"), "".join(chars), text[b:i], not closed))
            e = i
        else:
            e = _find_ws(text, e)
            token = text[b:e]
            name, sep, value = token.partition("=")
            flags.append(Flag(name.lstrip("-"), value if sep else None, token))
        b = _skip_ws(text, e)
    return flags, text[b:].strip(_WS)


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _find_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] not in _WS:
        i += 1
    return i


def lint(flags: XlaFlags, jax_version: tuple[int, ...] | None) -> list[str]:
    """Fail on what XLA would abort on or what would swallow pgle's flags; return warnings
    for what it would silently ignore. Flags not in pgle's table are left to
    `pgle.xla.flag_probe.refuse_rejected` (it asks the installed jaxlib)."""
    for flag in flags.flags:
        entry = flag_table.removed_flag(flag.name, jax_version)
        if entry is not None:
            removed = ".".join(map(str, entry.removed_in))
            raise FlagError(
                f"XLA_FLAGS has --{flag.name}, which XLA removed in jax {removed} and would abort "
                f"on ('Unknown flag in XLA_FLAGS'): {entry.replacement}."
            )
    for flag in flags.flags:
        info = flag_table.flag_info(flag.name)
        if info is not None and info.since and jax_version is not None and jax_version < info.since:
            hint = ""
            if flag.name == flag_table.ACCURACY_CHECKER:
                hint = (
                    f"; before jax 0.4.36 use --{flag_table.OLD_ACCURACY_CHECKER}=true (strict: "
                    "any missing instruction fails the compile) or leave it out"
                )
            raise FlagError(
                f"XLA_FLAGS has --{flag.name}, which XLA of jax "
                f"{'.'.join(map(str, jax_version))} does not know (it exists since jax "
                f"{'.'.join(map(str, info.since))}) and would abort on ('Unknown flag in "
                f"XLA_FLAGS'){hint}."
            )
    for row in flag_table.explain_all(flags.flags, jax_version):
        if row["status"] == "error":
            raise FlagError(
                f"XLA_FLAGS has {row['flag']}: {row['message']}.",
                hint="Fix or remove it; `pgle flags explain` shows every flag.",
            )
    warnings = []
    old = flags.value(flag_table.OLD_ACCURACY_CHECKER)
    if old in ("true", "1") and not flag_table.removed_flag(
        flag_table.OLD_ACCURACY_CHECKER, jax_version
    ):
        warnings.append(
            f"--{flag_table.OLD_ACCURACY_CHECKER}=true is strict: the compile of any module the "
            "profile does not fully cover fails ('Found N missing instructions. Discarding the "
            "profile.'); jax < 0.4.36 has no warn-only checker."
        )
    level = flags.value(flag_table.ACCURACY_CHECKER) or ""
    if level.upper().endswith("_ERROR") and flag_table.error_strictness_fails(jax_version):
        warnings.append(
            f"--{flag_table.ACCURACY_CHECKER}={level}: "
            + flag_table.error_strictness_hazard()
            + "."
        )
    path = flags.value(flag_table.PGLE_PROFILE_PATH)
    if (
        path
        and jax_version is not None
        and jax_version >= (0, 5, 1)
        and "." in path.rsplit("/", 1)[-1]
        and not path.endswith((".pb", ".pbtxt"))
    ):
        warnings.append(
            f"--{flag_table.PGLE_PROFILE_PATH}={path}: XLA of jax >= 0.5.1 reads only .pb and "
            ".pbtxt files and silently ignores any other extension (jax 0.4.x read it)."
        )
    if flags.ignored_tail:
        warnings.append(
            f"XLA stops reading XLA_FLAGS at {flags.ignored_tail.split()[0]!r}: everything from "
            "there on is ignored (every flag must start with '--')."
        )
    return warnings
