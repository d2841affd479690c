"""Evidence from XLA's log: what it says about each compiled module and PGLE profile.

XLA logs, per module compiled while a profile is set (gpu_hlo_schedule.cc):
`Using PGLE profile from <path>` then `Found profile for module <m>, using
profile guided latency estimator`. "Found profile" is logged for every module
when one file is given, even if nothing in it matches the module; what proves
the fit is the accuracy checker (profile_guided_latency_estimator.cc), which
prints `Found <n> instructions from the profile.`, `Missing <N> instructions
from the profile.` and the missing names *only when something is missing*, in
the compiling thread, without naming the module. So: a module whose "Found
profile" line is followed by no checker block fitted fully (checker on, its
default since jax 0.4.36); otherwise coverage = found / (found + missing).

What the real XLA:GPU compiler of jax 0.4.34-0.10.2 prints, and how each line is read here,
is in tests/data/xla_gpu/README.md (captured by the deviceless lane) and docs/gpu-validation.md.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import BinaryIO, Iterable

from pgle.evidence import logscan

MAX_MISSING_NAMES = 50
_FINGERPRINT_FILE = re.compile(r"^([0-9a-f]{32})\.(pb|pbtxt)$")
CHUNK = 8 << 20
# Of a line longer than LONG_LINE only its start and its last LONG_LINE_TAIL bytes are scanned.
LONG_LINE = 8 << 20
LONG_LINE_TAIL = 64 << 10


def _literal_start(pattern: re.Pattern) -> str:
    """The text every match of an anchored pattern starts with (up to its first operator)."""
    text = pattern.pattern.removeprefix("^")
    for i, c in enumerate(text):
        if c in "\\()[]?*+{|.$^":
            return text[:i - 1] if c in "?*{" else text[:i]
    return text


# What every message _message acts on starts with: one C-level startswith, instead of fifteen
# regex matches, for the scheduler's other lines, which the pre-filter keeps (jax >= 0.7.2 logs
# `Using unified latency estimator` for every module).
_MESSAGE_STARTS = tuple(_literal_start(p) for p in (
    logscan.FINGERPRINT, logscan.USING_FDO, logscan.USING_PROFILE, logscan.FOUND_PROFILE,
    logscan.CHECK_FOUND, logscan.CHECK_MISSING, logscan.FILE_MISSING, logscan.PARSE_FAILED,
    logscan.PARSE_FAILED_OLD, logscan.FDO_UNPARSABLE, logscan.MAY_NOT_APPLY,
    logscan.UNKNOWN_FLAGS, logscan.SOL_FALLBACK, logscan.MISSED_COST, logscan.LHS_UNSET))



@dataclasses.dataclass
class ModuleEvidence:
    module: str | None
    rank: int | None = None
    fingerprint: str | None = None
    profile_path: str | None = None
    found_profile: bool = False
    checker_found: int | None = None
    checker_missing: int | None = None
    missing_names: list[str] = dataclasses.field(default_factory=list)
    discarded: bool = False
    no_profile_file: bool = False
    note: str | None = None
    # jax <= 0.4.30: "PGLE profile may not applicable ...: cost name X not in module M".
    not_in_module: list[str] = dataclasses.field(default_factory=list)
    ordinal: int | None = None  # k-th module XLA reported (naming fallback: no VLOG line)
    missed_costs: int = 0  # "PGLE missed cost for: X" (VLOG) in this module
    sol_fallback: bool = False  # "PGLE fallback: using SolLatencyEstimator" (jax >= 0.10)


@dataclasses.dataclass
class _Thread:
    fingerprint: tuple[str, str] | None = None  # (module, fingerprint) from the VLOG line
    using: str | None = None
    current: ModuleEvidence | None = None
    expect_names: int = 0
    sol_fallback: bool = False


@dataclasses.dataclass
class Evidence:
    modules: list[ModuleEvidence] = dataclasses.field(default_factory=list)
    reads: list[str] = dataclasses.field(default_factory=list)  # `Using PGLE profile from`
    missing_files: list[str] = dataclasses.field(default_factory=list)
    parse_errors: list[str] = dataclasses.field(default_factory=list)
    # "Found N missing instructions. Discarding the profile." (ERROR strictness): the compile failed.
    discards: list[str] = dataclasses.field(default_factory=list)
    unknown_flags: list[str] = dataclasses.field(default_factory=list)  # XLA aborted on them
    info_lines: int = 0  # XLA INFO lines seen: none while checker lines show = INFO hidden
    checker_lines: int = 0  # accuracy-checker lines (WARNING/ERROR: shown at level 1 too)
    lhs_unset_warnings: int = 0
    cupti_contention: bool = False
    pgle_lines: int = 0
    bytes_scanned: int = 0


class LogScanner:
    """Feeds on log lines (bytes); keeps per-thread state, since modules compile in parallel."""

    def __init__(self):
        self.evidence = Evidence()
        self._threads: dict[tuple, _Thread] = {}

    # -- input --------------------------------------------------------------
    def scan_file(self, path: Path | str) -> Evidence:
        with open(path, "rb", buffering=0) as f:
            self.scan_stream(f)
        return self.evidence

    def scan_stream(self, f: BinaryIO) -> Evidence:
        """Feed the lines holding a pre-filter literal (logscan.ANCHORS), in order.

        One buffer is reused for the whole log (readinto: no allocation or copy of each block);
        the unfinished last line of a block is moved to the buffer's start and completed by the
        next read. Memory stays max(CHUNK, LONG_LINE) whatever the lines (issue 20: a 300 MB
        `\r` progress bar held whole took 552 MB): a line longer than LONG_LINE is scanned by
        its start, and of the rest only the last LONG_LINE_TAIL bytes are kept, where an XLA
        line glued after a progress bar starts when its newline comes (logscan.parse_prefix
        finds it inside)."""
        buf = bytearray(CHUNK)
        kept = 0  # bytes of an unfinished line at buf[:kept]
        long_line = False  # buf[:kept] is the tail of a line longer than the buffer
        while True:
            if kept == len(buf) and len(buf) < LONG_LINE:
                buf += bytes(min(len(buf), LONG_LINE - len(buf)))  # a line longer than CHUNK
            elif kept == len(buf):
                if not long_line:
                    self._scan_block(buf, kept)
                    long_line = True
                buf[:LONG_LINE_TAIL] = buf[kept - LONG_LINE_TAIL:kept]  # same length: no resize
                kept = LONG_LINE_TAIL
            end = kept
            with memoryview(buf) as view:
                # A pipe gives 64 KiB a read: fill the buffer, so that each search pass covers
                # a whole block and the costs per block stay negligible.
                while end < len(buf) and (n := f.readinto(view[end:])):
                    end += n
            if end == kept:
                break
            self.evidence.bytes_scanned += end - kept
            cut = buf.rfind(b"\n", 0, end) + 1
            if cut:
                self._scan_block(buf, cut)
                buf[:end - cut] = buf[cut:end]  # same length: the buffer is not resized
                kept = end - cut
                long_line = False
            else:
                kept = end
        if kept:  # the last line, without a newline
            self._scan_block(buf, kept)
        return self.evidence

    def feed_lines(self, lines: Iterable[bytes]) -> Evidence:
        for line in lines:
            self.feed(line)
        return self.evidence

    def _scan_block(self, data: bytearray, end: int) -> None:
        """Feed each line of data[:end] that holds a pre-filter literal (logscan.line_starts):
        a block without one costs a few C-level searches and no Python work per line."""
        for start in logscan.line_starts(data, end):
            nl = data.find(b"\n", start, end)
            self.feed(bytes(data[start:end if nl < 0 else nl]))

    # -- the state machine ------------------------------------------------------
    def feed(self, raw: bytes) -> None:
        ev = self.evidence
        if logscan.CUPTI_CONTENTION.search(raw):
            ev.cupti_contention = True
        line = logscan.parse_prefix(raw)
        if line is None:
            # The ERROR-level checker fails compilation; the status reaches Python's traceback
            # (`XlaRuntimeError: INVALID_ARGUMENT: Found 7 missing instructions. Discarding ...`).
            text = raw.decode("utf-8", "replace")
            if m := logscan.CHECK_DISCARD.search(text):
                ev.pgle_lines += 1
                ev.discards.append(text[m.start():].strip())
                last = next((m for m in reversed(ev.modules) if m.checker_missing), None)
                if last is not None:
                    last.discarded = True
            return
        if line.severity == "I":
            ev.info_lines += 1
        key = (line.rank, line.thread)
        state = self._threads.get(key)
        if state is None:
            state = self._threads[key] = _Thread()
        msg = line.message
        if state.expect_names:
            m = logscan.CHECK_NAME.match(msg)
            if m:
                if state.current is not None and len(state.current.missing_names) < MAX_MISSING_NAMES:
                    state.current.missing_names.append(m.group("name"))
                state.expect_names -= 1
                return
        self._message(msg, state, line.rank)

    def _message(self, msg: str, state: _Thread, rank: int | None) -> None:
        if not msg.startswith(_MESSAGE_STARTS):
            return  # the scheduler's other lines (`Using unified latency estimator`, ...)
        ev = self.evidence
        if m := logscan.FINGERPRINT.match(msg):
            state.fingerprint = (m.group("module"), m.group("fp"))
            ev.pgle_lines += 1
        elif m := logscan.USING_FDO.match(msg):
            state.using = f"fdo_profile ({m.group('fmt')})"
            ev.reads.append(state.using)
            ev.pgle_lines += 1
        elif m := logscan.USING_PROFILE.match(msg):
            state.using = m.group("path")
            ev.reads.append(state.using)
            ev.pgle_lines += 1
        elif m := logscan.FOUND_PROFILE.match(msg):
            ev.pgle_lines += 1
            module, fp = m.group("module"), None
            if state.fingerprint:
                module = module or state.fingerprint[0]
                fp = state.fingerprint[1]
            if fp is None and state.using:
                fm = _FINGERPRINT_FILE.match(Path(state.using).name)
                fp = fm.group(1) if fm else None
            state.current = ModuleEvidence(module, rank, fp, state.using, found_profile=True,
                                           ordinal=sum(1 for x in ev.modules if x.found_profile) + 1)
            ev.modules.append(state.current)
            state.current.sol_fallback, state.sol_fallback = state.sol_fallback, False
            state.using = None
            state.fingerprint = None
        elif m := logscan.CHECK_FOUND.match(msg):
            ev.pgle_lines += 1
            ev.checker_lines += 1
            self._block_owner(state, rank).checker_found = int(m.group("n"))
        elif m := logscan.CHECK_MISSING.match(msg):
            ev.pgle_lines += 1
            ev.checker_lines += 1
            n = int(m.group("n"))
            self._current(state, rank).checker_missing = n
            state.expect_names = n
        elif m := logscan.FILE_MISSING.match(msg):
            ev.pgle_lines += 1
            path = m.group("path")
            fm = _FINGERPRINT_FILE.match(Path(path).name)
            if fm is None:
                ev.missing_files.append(path)
            elif fm.group(2) == "pb":
                # XLA looks for <fp>.pbtxt, then <fp>.pb: both gone means no profile for it.
                module = state.fingerprint[0] if state.fingerprint else None
                ev.modules.append(ModuleEvidence(module, rank, fm.group(1), path,
                                                 no_profile_file=True))
                state.fingerprint = None
        elif m := (logscan.PARSE_FAILED.match(msg) or logscan.PARSE_FAILED_OLD.match(msg)):
            ev.pgle_lines += 1
            ev.parse_errors.append(f"{m.group('path')}: {m.group('error')}")
        elif logscan.FDO_UNPARSABLE.match(msg):
            ev.pgle_lines += 1
            ev.parse_errors.append("fdo_profile: not a valid ProfiledInstructionsProto")
        elif m := logscan.MAY_NOT_APPLY.match(msg):
            ev.pgle_lines += 1
            if state.current is not None:
                if m.group("name"):
                    state.current.module = state.current.module or m.group("module")
                    state.current.not_in_module.append(m.group("name"))
                else:
                    state.current.note = f"XLA: profile may not apply: {m.group('why')}"
        elif m := logscan.UNKNOWN_FLAGS.match(msg):
            ev.pgle_lines += 1
            ev.unknown_flags += m.group("flags").split()
        elif logscan.SOL_FALLBACK.match(msg):
            # Logged before "Found profile for module": remember it for that module.
            state.sol_fallback = True
        elif m := logscan.MISSED_COST.match(msg):
            if state.current is not None:
                state.current.missed_costs += 1
        elif logscan.LHS_UNSET.match(msg):
            ev.lhs_unset_warnings += 1

    def _block_owner(self, state: _Thread, rank: int | None) -> ModuleEvidence:
        """The module a new checker block belongs to.

        jax 0.4.34 logs the block in absl style (with a thread id) after tsl-style "Found
        profile" lines (without one): it belongs to the newest thread-less module that has
        no block yet."""
        plain = self._threads.get((rank, None))
        if plain is not None and plain is not state and plain.current is not None \
                and plain.current is not state.current \
                and plain.current.checker_found is None and plain.current.checker_missing is None:
            state.current = plain.current
        elif state.current is not None and state.current.checker_found is not None:
            # A second block with no "Found profile" between (the INFO log hidden): a new module.
            state.current = None
        return self._current(state, rank)

    def _current(self, state: _Thread, rank: int | None) -> ModuleEvidence:
        if state.current is None:
            # A checker block with no "Found profile" before it (the INFO log hidden).
            state.current = ModuleEvidence(None, rank, found_profile=True)
            self.evidence.modules.append(state.current)
        return state.current
