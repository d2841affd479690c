"""XLA and JAX log lines that tell whether PGLE was used.

Both prefix styles are understood:
- before jax 0.7.2 (tsl):
  `2023-07-21 16:09:43.551741: I external/xla/.../gpu_hlo_schedule.cc:573] msg`, with a thread
  id after the severity when TF_CPP_LOG_THREAD_ID is set;
- jax >= 0.7.2 (absl): `I0822 12:34:56.789012  12345 gpu_hlo_schedule.cc:538] msg`.
An `srun --label` rank prefix (`3: `) is accepted in front of either. Lines logged before absl
is initialised carry a zero date and the epoch time (`I0000 00:00:1732377600.123456  12 f.cc:1]`;
seen with jax >= 0.4.36). Text printed without a newline before a log line (a progress bar
ending in `\r`, or no line end at all) does not hide it: the prefix is looked for inside the
line too (`parse_prefix`). jax 0.4.34 logs the accuracy-checker block in absl style while its
other lines are tsl style (tests/data/xla_gpu/0.4.34/partial-error.log).

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
    rb"(?P<file>[^\s\]]+):(?P<lineno>\d+)\] (?P<msg>.*)$"
)
_ABSL = re.compile(
    _RANK + rb"(?P<sev>[IWEF])(?:\d{4} \d\d:\d\d:\d\d|0000 00:00:\d+)\.\d+\s+(?P<tid>\d+) "
    rb"(?P<file>[^\s\]]+):(?P<lineno>\d+)\] (?P<msg>.*)$"
)
# The same two prefixes anywhere in a line (after a progress bar's text), without a rank.
_INSIDE = re.compile(
    rb"(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF][\s\d]*"
    rb"|[IWEF](?:\d{4} \d\d:\d\d:\d\d|0000 00:00:\d+)\.\d+\s+\d+ )[^\s\]]+:\d+\] "
)


@dataclasses.dataclass(frozen=True)
class LogLine:
    severity: str  # I W E F
    thread: str | None
    file: str  # basename of the source file
    message: str
    rank: int | None
    lineno: int = 0  # the source line in `file` that logged it (moves between XLA versions)
    absl: bool = True  # absl prefix (jax >= 0.7.2; the 0.4.x checker block too), else tsl


def parse_prefix(line: bytes) -> LogLine | None:
    """Split an XLA log line into prefix fields and message; None for other lines."""
    line = line.rstrip(b"\r\n")
    m = _ABSL.match(line) or _OLD.match(line)
    if m is None:
        inside = _INSIDE.search(line, 1)
        if inside is None:
            return None
        line = line[inside.start() :]
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
        int(m.group("lineno")),
        m.re is _ABSL,
    )


# --- gpu_hlo_schedule.cc -------------------------------------------------------
USING_PROFILE = re.compile(r"^Using PGLE profile from (?P<path>.+?)\s*$")
# jax 0.4.34 said "Using PGLE profile for module from fdo_profile (binary)".
USING_FDO = re.compile(
    r"^Using PGLE profile (?:for module )?from fdo_profile \((?P<fmt>binary|text)\)"
)
# Current wording names the module; before jax 0.7.0 it did not.
FOUND_PROFILE = re.compile(
    r"^Found profile(?: for module (?P<module>\S+?))?, using profile guided latency estimator"
)
FILE_MISSING = re.compile(r"^PGLE profile file does not exist: (?P<path>.+?)\s*$")
PARSE_FAILED = re.compile(
    r"^Tried but failed to parse PGLE proto from (?P<fmt>text|binary) file '(?P<path>.*)'\. "
    r"Error message: (?P<error>.*)$"
)
# jax 0.4.34-0.5.0: "Unable to read PGLE text proto from P: Can't parse P as text proto"
# (the lane's logs of 0.4.35, 0.4.38, 0.5.0; 0.5.1 has the wording above). The error repeats
# the path: it ends at the last ": Can't parse ", so a folder whose name holds ": " keeps its
# whole path.
PARSE_FAILED_OLD = re.compile(
    r"^Unable to read PGLE (?P<fmt>text|binary) proto from "
    r"(?P<path>.+(?=: Can't parse )|.+?): (?P<error>.*)$"
)
# jax 0.4.34 spelled it "Unable to prase FDO profile" (sic).
FDO_UNPARSABLE = re.compile(
    r"^Unable to (?:parse fdo_profile|prase FDO profile): not a valid text or binary "
    r"ProfiledInstructionsProto"
)
MAY_NOT_APPLY = re.compile(  # jax 0.4.16 - 0.4.30; names the first profile entry not in M
    r"^PGLE profile may not applicable to the module, but will still be used : (?P<why>"
    r"cost name (?P<name>\S+) not in module (?P<module>\S+)|.*)$"
)
# VLOG(1) lines of jax >= 0.10 (SOL fallback) and >= 0.7.2 (no profile for the module).
SOL_FALLBACK = re.compile(r"^PGLE fallback: using SolLatencyEstimator")
MISSED_COST = re.compile(r"^PGLE missed cost for: (?P<name>\S+)")
UNIFIED_ESTIMATOR = re.compile(r"^Using unified latency estimator")
# jax 0.5.x-0.6.x: a profile with the LHS flag unset (the scheduler then runs anyway).
LHS_UNSET = re.compile(
    r"^Profile data detected but `?xla_gpu_enable_latency_hiding_scheduler`? unset"
)
FINGERPRINT = re.compile(  # VLOG(1) with TF_CPP_VMODULE=gpu_hlo_schedule=1
    r"^Fingerprint before LHS for module (?P<module>\S+?)(?:\((?P<id>\d+)\))? "
    r"= (?P<fp>[0-9a-f]{32})"
)
# A WARNING per module when the checker flag is set without a profile path (JAX-Toolbox
# issue 1135, a nightly of jax ~0.4.35; tests/data/xla_gpu/public/): harmless.
CHECKER_WITHOUT_PATH = re.compile(
    r"^xla_gpu_pgle_accuracy_checker is set to (?P<level>\w+), but no profile path specified"
)

# --- profile_guided_latency_estimator.cc: the accuracy checker -----------------
# Printed only when something is missing; the block does not name the module.
CHECK_FOUND = re.compile(r"^Found (?P<n>\d+) instructions from the profile\.")
CHECK_MISSING = re.compile(r"^Missing (?P<n>\d+) instructions from the profile\.")
CHECK_NAME = re.compile(r"^  (?P<name>\S+)\s*$")
CHECK_DISCARD = re.compile(r"Found (?P<n>\d+) missing instructions\. Discarding the profile\.")

# --- the compile failed in XLA's HLO verifier -----------------------------------------
# jax 0.11.2 and 0.12.0.1 under PGLE_STRICTNESS_LEVEL_ERROR, with a complete profile or none:
# `FAILED_PRECONDITION: during context [hlo verifier]: Expected instruction name to remain the
# same. Was 'all-gather-start' is 'all_gather.3.2'.` (an async collective XLA made synchronous
# after scheduling got a new name; seen with the real XLA:GPU compiler, deviceless H100 x8).
# It reaches the log as Python's exception line (`jax.errors.JaxRuntimeError: ...`), which
# names no module; any verifier failure is a failed compile.
VERIFIER_FAILED = re.compile(
    r"(?:(?P<code>[A-Z][A-Z_]+): )?during context \[hlo verifier\]: (?P<why>.*?)\s*$"
)

# --- convert_async_collectives_to_sync.cc: after scheduling -----------------------
# VLOG(3) (TF_CPP_VMODULE=convert_async_collectives_to_sync=3), in the compiling thread, after
# the module's scheduler lines: `Found async start %<name> = <the whole instruction>` for each
# async collective the pass looks at, then `Added pair: {all-reduce-start, all-reduce-done` (no
# closing brace) for each pair with nothing scheduled between start and done, which XLA then
# runs synchronously. Source lines (start, pair): 222/238 on jax 0.10.2 and 0.11.0, 219/235
# on 0.11.1, 233/252 on 0.11.2, 56/75 on 0.12.0.1 (docs/gpu-validation.md has every version);
# what it means for a profile: pgle.verdicts.sync_converted.
ASYNC_START_SEEN = re.compile(r"^Found async start %?(?P<start>[\w.\-]+) = ")
ADDED_PAIR = re.compile(r"^Added pair: \{(?P<start>[^,\s{}]+), (?P<done>[^,\s{}]+)")

# --- parse_flags_from_env.cc: XLA aborts (F) on a flag it does not know ----------
# jax >= 0.5.3: "Unknown flag in XLA_FLAGS: --x=1"; jax 0.4.34: "Unknown flags in XLA_FLAGS:
# --x=1  <every XLA_FLAGS entry>" (the unknown ones, two spaces, then all of them).
UNKNOWN_FLAGS = re.compile(r"^Unknown flags? in XLA_FLAGS: (?P<flags>.*?)(?:  .*)?$")

# --- the environment --------------------------------------------------------------
CUPTI_CONTENTION = re.compile(rb"CUPTI_ERROR_MULTIPLE_SUBSCRIBERS|CUPTI_ERROR_NOT_INITIALIZED")


# --- the pre-filter ----------------------------------------------------------------
# Every line the scanner acts on holds one of the literals below; all other lines are skipped
# with no Python-level work (line_starts). Profiled on a 1 GB log (benchmarks/bench_logscan.py):
# the time is all in CPython's bytes.find, one pass per literal, and the six short words used
# before ("profile", "PGLE", ...) were slow passes whose hits included the profiler's own lines,
# each then costing a regex. Now:
# - MAIN: two long literals, one two-way bytes.find pass each (its skip table shifts by up to
#   the literal's length, so long literals are the cheapest passes);
# - RARE: three literals for rare events, each found through memchr (bytes.find of one byte,
#   several times faster than a two-way pass) on one upper-case byte of the literal, rare in
#   logs, then checked in place; where that byte turns out to be common (more than one hit per
#   RARE_BUDGET bytes so far), the block's rest is searched for the literals themselves, so the
#   worst case is the two-way pass plus a few hits.
# Why these literals are enough:
# - gpu_hlo_schedule.cc: the source file, in the line's prefix, of every scheduler line read
#   here (USING_PROFILE, USING_FDO, FOUND_PROFILE, FILE_MISSING, PARSE_FAILED(_OLD),
#   FDO_UNPARSABLE, MAY_NOT_APPLY, SOL_FALLBACK, LHS_UNSET, FINGERPRINT) in the real XLA:GPU
#   logs of jax 0.4.34, 0.5.3, 0.6.2, 0.7.2, 0.8.3 and 0.10.2 (tests/data/xla_gpu/<jax>/) and in
#   the public logs of jax 0.4.25 and of 2023 (tests/data/xla_gpu/public/).
# - profile_guided_latency_estimator.cc: the source file of the accuracy checker's lines
#   (CHECK_FOUND, CHECK_MISSING, and each missing name, logged on a line of its own: CHECK_NAME)
#   in the same six jax versions, and of `PGLE missed cost for` (MISSED_COST, a VLOG in the
#   estimator's NodeCost in XLA's source). Since the names carry it too, the scanner never
#   reads the lines after `Missing N` one by one, as it did before.
# - " in XLA_FLAGS", the two CUPTI errors, "missing instructions. Discarding the profile.", and
#   "] Added pair: {", "] Found async start %": part of UNKNOWN_FLAGS, CUPTI_CONTENTION,
#   CHECK_DISCARD, VERIFIER_FAILED ("[hlo verifier]") and (with the prefix's closing
#   bracket) ADDED_PAIR and ASYNC_START_SEEN themselves, so any line those match holds one,
#   whatever printed it (the flag parser's F line, CUPTI's errors from any profiler file, the
#   compile error in Python's traceback).
# tests/evidence/test_logscan_prefilter.py checks, on every fixture, that the evidence from the
# pre-filtered scan equals the evidence from feeding every line.
MAIN = (b"gpu_hlo_schedule.cc", b"profile_guided_latency_estimator.cc")
RARE = (  # (byte looked for with memchr, the literals holding it)
    (b"X", (b" in XLA_FLAGS",)),
    (b"O", tuple(CUPTI_CONTENTION.pattern.split(b"|"))),  # the O of CUPTI_ERROR_ in both
    (b"D", (b"missing instructions. Discarding the profile.",)),
    # A compile that failed in XLA's HLO verifier: Python's exception line (jax >= 0.11).
    (b"[", (b"[hlo verifier]",)),
    # VLOG(3) lines few runs enable; `{` and `%` are rare in a training log, and where one is
    # common (printed dicts, progress bars) the literal's own search takes over (RARE_BUDGET).
    (b"{", (b"] Added pair: {",)),
    (b"%", (b"] Found async start %",)),
)
ANCHORS = MAIN + tuple(lit for _, lits in RARE for lit in lits)
RARE_BUDGET = 1 << 13  # bytes per memchr hit, on average, below which two-way search is cheaper


# After a MAIN file name in a log line's prefix: its line number and the prefix's end.
_AFTER_FILE = re.compile(rb":\d+\] ")


def line_starts(
    data: bytes | bytearray, end: int, messages: tuple[bytes, ...] | None = None
) -> list[int]:
    """The start of each line of data[:end] the scanner can use, once, in order: a line with a
    RARE literal, and a line where a MAIN file name ends a log prefix (`file.cc:NNN] `) whose
    message starts with one of `messages` (None: every line holding a MAIN literal)."""
    starts: set[int] = set()
    for lit in MAIN:
        if messages is None:
            _lines_with(data, lit, 0, end, starts)
        else:
            _lines_logged(data, lit, messages, end, starts)
    for byte, lits in RARE:
        _lines_with_rare(data, byte, lits, end, starts)
    return sorted(starts)


def _lines_with(data: bytes | bytearray, lit: bytes, pos: int, end: int, starts: set[int]) -> None:
    hit = data.find(lit, pos, end)
    while hit >= 0:
        starts.add(data.rfind(b"\n", 0, hit) + 1)
        nl = data.find(b"\n", hit, end)
        if nl < 0:
            return
        hit = data.find(lit, nl + 1, end)


def _lines_logged(
    data: bytes | bytearray, lit: bytes, messages: tuple[bytes, ...], end: int, starts: set[int]
) -> None:
    """Lines where `lit` is the file of a log prefix whose message starts with one of
    `messages`: the file's other lines (the profile dump's `Profile:`, the parse attempts,
    VLOG lines no handler reads) cost one match and one startswith each, not a line in Python."""
    hit = data.find(lit, 0, end)
    while hit >= 0:
        after = _AFTER_FILE.match(data, hit + len(lit), end)
        if after is not None and data.startswith(messages, after.end(), end):
            starts.add(data.rfind(b"\n", 0, hit) + 1)
            nl = data.find(b"\n", hit, end)
            if nl < 0:
                return
            hit = data.find(lit, nl + 1, end)
        else:  # not this prefix's message: a later prefix on the same line may still be one
            hit = data.find(lit, hit + len(lit), end)


def _lines_with_rare(
    data: bytes | bytearray, byte: bytes, lits: tuple[bytes, ...], end: int, starts: set[int]
) -> None:
    seen = 0
    hit = data.find(byte, 0, end)
    while hit >= 0:
        seen += 1
        if seen > 16 + hit // RARE_BUDGET:  # common here: the literals themselves from here on
            for lit in lits:
                _lines_with(data, lit, max(0, hit - len(lit)), end, starts)
            return
        for lit in lits:
            at = hit - lit.index(byte)
            if at >= 0 and data.startswith(lit, at, end):
                starts.add(data.rfind(b"\n", 0, at) + 1)
        hit = data.find(byte, hit + 1, end)
