"""XLA and JAX log lines that tell whether PGLE was used.

Both prefix styles are understood:
- before jax 0.7.2 (tsl): `2023-07-21 16:09:43.551741: I external/xla/.../gpu_hlo_schedule.cc:573] msg`,
  with a thread id after the severity when TF_CPP_LOG_THREAD_ID is set;
- jax >= 0.7.2 (absl): `I0822 12:34:56.789012  12345 gpu_hlo_schedule.cc:538] msg`.
An `srun --label` rank prefix (`3: `) is accepted in front of either.

Messages are the wordings of XLA's gpu_hlo_schedule.cc and
profile_guided_latency_estimator.cc (XLA of 2026, with older wordings noted),
read in XLA's source; see docs/gpu-validation.md for what a GPU showed.
"""

from __future__ import annotations

import dataclasses
import re

_RANK = rb"(?:(?P<rank>\d+): )?"
_OLD = re.compile(
    _RANK + rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<sev>[IWEF])(?:\s+(?P<tid>\d+))? "
    rb"(?P<file>[^\s\]]+):\d+\] (?P<msg>.*)$"
)
_ABSL = re.compile(
    _RANK + rb"(?P<sev>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+(?P<tid>\d+) "
    rb"(?P<file>[^\s\]]+):\d+\] (?P<msg>.*)$"
)

# A cheap pre-filter: every line that matters holds one of these literals.
CANDIDATES = tuple(re.compile(re.escape(lit)) for lit in (
    b"profile", b"PGLE proto", b"Fingerprint before LHS", b"CUPTI_ERROR"))


@dataclasses.dataclass(frozen=True)
class LogLine:
    severity: str  # I W E F
    thread: str | None
    file: str  # basename of the source file
    message: str
    rank: int | None


def parse_prefix(line: bytes) -> LogLine | None:
    """Split an XLA log line into prefix fields and message; None for other lines."""
    line = line.rstrip(b"\r\n")
    m = _ABSL.match(line) or _OLD.match(line)
    if m is None:
        return None
    rank = m.group("rank")
    return LogLine(
        m.group("sev").decode(),
        m.group("tid").decode() if m.group("tid") else None,
        m.group("file").decode("utf-8", "replace").rsplit("/", 1)[-1],
        m.group("msg").decode("utf-8", "replace"),
        int(rank) if rank is not None else None,
    )


# --- gpu_hlo_schedule.cc -------------------------------------------------------
USING_PROFILE = re.compile(r"^Using PGLE profile from (?P<path>.+?)\s*$")
USING_FDO = re.compile(r"^Using PGLE profile from fdo_profile \((?P<fmt>binary|text)\)")
# Current wording names the module; before jax 0.7.0 it did not.
FOUND_PROFILE = re.compile(
    r"^Found profile(?: for module (?P<module>\S+?))?, using profile guided latency estimator")
FILE_MISSING = re.compile(r"^PGLE profile file does not exist: (?P<path>.+?)\s*$")
PARSE_FAILED = re.compile(
    r"^Tried but failed to parse PGLE proto from (?P<fmt>text|binary) file '(?P<path>.*)'\. "
    r"Error message: (?P<error>.*)$")
FDO_UNPARSABLE = re.compile(
    r"^Unable to parse fdo_profile: not a valid text or binary ProfiledInstructionsProto")
MAY_NOT_APPLY = re.compile(  # jax 0.4.16 - 0.4.30
    r"^PGLE profile may not applicable to the module, but will still be used : (?P<why>.*)$")
FINGERPRINT = re.compile(  # VLOG(1) with TF_CPP_VMODULE=gpu_hlo_schedule=1
    r"^Fingerprint before LHS for module (?P<module>\S+?)(?:\((?P<id>\d+)\))? = (?P<fp>[0-9a-f]{32})")

# --- profile_guided_latency_estimator.cc: the accuracy checker -----------------
# Printed only when something is missing; the block does not name the module.
CHECK_FOUND = re.compile(r"^Found (?P<n>\d+) instructions from the profile\.")
CHECK_MISSING = re.compile(r"^Missing (?P<n>\d+) instructions from the profile\.")
CHECK_NAME = re.compile(r"^  (?P<name>\S+)\s*$")
CHECK_DISCARD = re.compile(r"Found (?P<n>\d+) missing instructions\. Discarding the profile\.")

# --- the environment --------------------------------------------------------------
CUPTI_CONTENTION = re.compile(rb"CUPTI_ERROR_MULTIPLE_SUBSCRIBERS|CUPTI_ERROR_NOT_INITIALIZED")
