"""How JAX reads a boolean environment variable: the one rule every guard and `doctor` use.

jax 0.10.2, jax/_src/config.py `bool_env` (used by `bool_state`, so by JAX_ENABLE_PGLE,
JAX_COMPILATION_CACHE_EXPECT_PGLE, JAX_ENABLE_COMPILATION_CACHE, ...): the value is
lower-cased (not stripped); 'y', 'yes', 't', 'true', 'on', '1' are true; 'n', 'no', 'f',
'false', 'off', '0' are false; anything else (the empty string included) makes
`import jax` raise ValueError("invalid truth value ...").
"""

from __future__ import annotations

from collections.abc import Mapping

TRUE_VALUES = ("y", "yes", "t", "true", "on", "1")
FALSE_VALUES = ("n", "no", "f", "false", "off", "0")


class NotABoolean(ValueError):
    """The variable is set to something jax refuses at import."""


def bool_env(environ: Mapping[str, str], name: str) -> bool | None:
    """True/False as jax reads `name`, None when unset; NotABoolean when jax would fail."""
    value = environ.get(name)
    if value is None:
        return None
    low = value.lower()
    if low in TRUE_VALUES:
        return True
    if low in FALSE_VALUES:
        return False
    raise NotABoolean(value)
