"""Secrets are never written: what pgle records of the environment and of the workload's
arguments (manifests, spec.json, reports, job and run folders, store metadata) passes here first.

A secret is recognised by its name, never by its value:
- an environment variable whose name holds KEY, TOKEN, SECRET, PASSWORD, PASSWD, PASSPHRASE,
  CREDENTIAL, AUTH, COOKIE or PRIVATE (`NVIDIA_API_KEY`, `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`);
- an option whose name has such a word (`--token=x`, `--password x`, `--api-key=x`,
  `--hf_token x`, `wandb.api_key=x`); XLA's own flags (`--xla_...`) are never secrets;
- the password of a URL (`https://user:pw@host`, `s3://AKIA...:abc/def+ghi@host`: it may hold
  `/` and `+`);
- an HTTP credential: `Authorization: Bearer xyz` (or Basic, Token...), `Bearer xyz`.
Its value becomes `<redacted>`; the name stays, so a record still says the variable was set.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"
_ENV_WORDS = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
)
# Options: whole words of the name (so `--keep` and `--monkey-patch` stay), or these anywhere.
_OPTION_WORDS = {
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "pass",
    "pwd",
    "credential",
    "credentials",
    "auth",
    "cookie",
    "apikey",
}
_OPTION_PARTS = (
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "apikey",
    "api_key",
    "private_key",
    "access_key",
)
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# `name=value` and `--name value` inside free text, only at the start of a word (a path such as
# /data/key=3/p.pb is not an assignment).
_ASSIGNMENT = re.compile(
    r"(?:(?<=[\s'\"(\[,])|^)(?P<name>-{0,2}[A-Za-z_][\w.-]*)=(?P<value>[^\s'\",)\]]+)"
)
# A secret option's value may start with one `-` (`--password -s3cr3t`: click takes it as the
# value); a word starting with `--` is the next option (or the `--` that ends the options). All
# in a lookahead: a word is both the value of the option before it and an option itself
# (`--steps -password x`), so matches overlap.
_SPACED = re.compile(
    r"(?:(?<=[\s'\"(\[,])|^)(?=(?P<name>--?[A-Za-z][\w.-]*)\s+"
    r"(?P<value>(?!--)[^\s'\",)\]][^\s'\",)\]]*))"
)
# The password may hold `/` and `+` (an AWS secret key in `s3://AKIA...:abc/def+ghi@host`): it
# runs to the `@`.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@'\"]+:)[^\s'\"@]+(?=@)")
# `Authorization: Bearer xyz` (an HTTP header in a command line or a log), `Bearer xyz` alone,
# `Authorization: Basic ...`, `Token ...`.
_AUTH_HEADER = re.compile(
    r"(?P<head>\b(?:proxy-)?authorization\s*[:=]\s*(?:(?:bearer|basic|token|digest|negotiate)\s+)?)"
    r"[^\s'\",]+",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<head>\bbearer\s+)(?!<redacted>)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
# Where an option may start: the start of the text or after a space (a newline included).
_OPTION_START = re.compile(r"(?:^|\s)-")


def secret_variable(name: str) -> bool:
    """An environment variable's name that says it holds a secret."""
    upper = name.upper()
    return any(word in upper for word in _ENV_WORDS)


def secret_option(name: str) -> bool:
    """An option (`--api-key`, `-p`... without its value) or `name` of `name=value` that says
    its value is a secret. XLA's flags never are."""
    bare = name.lstrip("-")
    if not bare or bare.lower().startswith("xla_"):
        return False
    if not name.startswith("-") and _ENV_NAME.match(bare):
        return secret_variable(bare)
    low = bare.lower()
    words = set(re.split(r"[-_.]+", low))
    return bool(words & _OPTION_WORDS) or any(part in low for part in _OPTION_PARTS)


def redact_text(text: str) -> str:
    """`text` with every secret value it spells out replaced."""
    # Most text (names, paths, numbers) holds no assignment, option or URL: no regex for it.
    if not text or (
        "=" not in text
        and "://" not in text
        and not _OPTION_START.search(text)
        and ":" not in text
        and "earer" not in text
    ):
        return text

    def assignment(m: re.Match[str]) -> str:
        return f"{m['name']}={REDACTED}" if secret_option(m["name"]) else m[0]

    text = _ASSIGNMENT.sub(assignment, text)
    values = [m.span("value") for m in _SPACED.finditer(text) if secret_option(m["name"])]
    for start, end in reversed(values):  # the spans never overlap: a value ends before the next
        text = text[:start] + REDACTED + text[end:]
    text = _URL_PASSWORD.sub(lambda m: m["head"] + REDACTED, text)
    text = _AUTH_HEADER.sub(lambda m: m["head"] + REDACTED, text)
    return _BEARER.sub(lambda m: m["head"] + REDACTED, text)


def redact_args(argv: Sequence[str]) -> list[str]:
    """A command line with its secrets replaced: `--token=x`, `--token x`, `NAME_KEY=x`."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next and not arg.startswith("--"):  # `-s3cr3t` may be the value (_SPACED)
            out.append(REDACTED)
            hide_next = False
            continue
        # `--token x` as one argument carries its own value (redact_text hides it): the next
        # argument is not its value.
        hide_next = (
            arg.startswith("-")
            and "=" not in arg
            and not any(c.isspace() for c in arg)
            and secret_option(arg)
        )
        out.append(redact_text(arg))
    return out


def redact_json(data: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings) with every secret replaced: values
    of environment-variable-like keys named as secrets, lists read as command lines, text."""
    if isinstance(data, str):
        return redact_text(data)
    if isinstance(data, Mapping):
        return {
            k: (
                REDACTED
                if isinstance(k, str)
                and _ENV_NAME.match(k)
                and secret_variable(k)
                and isinstance(v, str)
                else redact_json(v)
            )
            for k, v in data.items()
        }
    if isinstance(data, (list, tuple)):
        if data and all(isinstance(x, str) for x in data):
            return redact_args(data)
        return [redact_json(x) for x in data]
    return data
