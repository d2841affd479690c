"""What XLA's accuracy checker's silence means, per jax version and strictness.

Seen in the deviceless lane (tests/data/xla_gpu/<jax>/, partial-warn / partial-error /
good-error, each version's real compiler; docs/gpu-validation.md):
- jax <= 0.4.35: no checker unless `--xla_gpu_enable_pgle_accuracy_checker=true`, which is
  strict: it prints the block (severity E) and fails the compile on any missing instruction.
- jax 0.4.36-0.5.0 (0.4.38 and 0.5.0 seen): `--xla_gpu_pgle_accuracy_checker`, WARN by
  default, prints **nothing** under WARN nor under ERROR, even when instructions are missing;
  ERROR still fails the compile (`Found N missing instructions. Discarding the profile.`).
- jax >= 0.5.1: WARN prints `Found n / Missing N` and the names whenever something is
  missing; ERROR prints the block and fails the compile.
So a module that read the profile and got no block is fully covered when the checker prints
(>= 0.5.1 WARN), or when the compile would have failed otherwise (ERROR, the old strict
flag); unknown on 0.4.36-0.5.0 under WARN, or when the version is unknown; unverified
without a checker.
"""

from __future__ import annotations

from pgle.evidence.log_version import Inference
from pgle.verdicts.pgle_applied import SILENCE_FULL, SILENCE_OFF, SILENCE_UNKNOWN

Version = tuple[int, ...]
NEW_CHECKER_SINCE = (0, 4, 36)  # --xla_gpu_pgle_accuracy_checker, WARN by default
WARN_PRINTS_SINCE = (0, 5, 1)  # the WARN checker prints its block


def silence(jax: Version | None, level: str | None, *, old_flag: bool = False) -> str:
    """For a run whose jax and checker flags are known (`pgle run`).

    `level`: the value of --xla_gpu_pgle_accuracy_checker (None: unset, i.e. WARN);
    `old_flag`: --xla_gpu_enable_pgle_accuracy_checker=true (jax <= 0.4.35)."""
    if jax is None:
        return SILENCE_UNKNOWN
    if jax < NEW_CHECKER_SINCE:
        return SILENCE_FULL if old_flag else SILENCE_OFF
    level = (level or "WARN").upper()
    if level.endswith("OFF"):
        return SILENCE_OFF
    if level.endswith("ERROR"):
        return SILENCE_FULL
    return SILENCE_FULL if jax >= WARN_PRINTS_SINCE else SILENCE_UNKNOWN


def silence_of_log(
    inference: Inference, *, checker_off: bool, checker_lines: int, discards: int
) -> str:
    """For a saved log (`pgle verify`): the version inferred (or given), and what the log
    shows of the strictness (a failed compile: ERROR; checker lines: a checker ran)."""
    if checker_off:
        return SILENCE_OFF
    if inference.within(None, (0, 4, 35)):
        # Only the old strict flag prints a block, and it fails the compile on a miss.
        return SILENCE_FULL if checker_lines or discards else SILENCE_OFF
    if discards and inference.within(NEW_CHECKER_SINCE, None):
        return SILENCE_FULL  # ERROR strictness: a module that compiled missed nothing
    if inference.within(WARN_PRINTS_SINCE, None):
        return SILENCE_FULL
    return SILENCE_UNKNOWN
