"""The PGLE verdict: what XLA's log says about each compiled module.

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
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import BinaryIO, Iterable

from pgle import logscan

GPU_PLATFORMS = ("gpu", "cuda", "rocm")
MAX_MISSING_NAMES = 50
MAX_WAIT_LINES = 100_000
_FINGERPRINT_FILE = re.compile(r"^([0-9a-f]{32})\.(pb|pbtxt)$")
CHUNK = 8 << 20

STATUSES = ("applied", "partial", "not_applied", "not_applicable", "error")


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


@dataclasses.dataclass
class _Thread:
    fingerprint: tuple[str, str] | None = None  # (module, fingerprint) from the VLOG line
    using: str | None = None
    current: ModuleEvidence | None = None
    expect_names: int = 0


@dataclasses.dataclass
class Evidence:
    modules: list[ModuleEvidence] = dataclasses.field(default_factory=list)
    reads: list[str] = dataclasses.field(default_factory=list)  # `Using PGLE profile from`
    missing_files: list[str] = dataclasses.field(default_factory=list)
    parse_errors: list[str] = dataclasses.field(default_factory=list)
    cupti_contention: bool = False
    pgle_lines: int = 0
    bytes_scanned: int = 0


class LogScanner:
    """Feeds on log lines (bytes); keeps per-thread state, since modules compile in parallel."""

    def __init__(self):
        self.evidence = Evidence()
        self._threads: dict[tuple, _Thread] = {}
        self._expecting = 0  # threads still owed missing-instruction names
        self._waited = 0  # lines read one by one since the last name

    # -- input --------------------------------------------------------------
    def scan_file(self, path: Path | str) -> Evidence:
        with open(path, "rb") as f:
            self.scan_stream(f)
        return self.evidence

    def scan_stream(self, f: BinaryIO) -> Evidence:
        carry = b""
        while True:
            block = f.read(CHUNK)
            if not block:
                break
            self.evidence.bytes_scanned += len(block)
            data = carry + block
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            self._scan_block(data, cut)
        if carry:
            self._scan_block(carry + b"\n", len(carry) + 1)
        return self.evidence

    def feed_lines(self, lines: Iterable[bytes]) -> Evidence:
        for line in lines:
            self.feed(line)
        return self.evidence

    def _scan_block(self, data: bytes, end: int) -> None:
        # Jump between lines holding a candidate literal (single-literal searches
        # run several times faster than one alternation); after a "Missing N"
        # line, read line by line until that thread's N names have come.
        hits = sorted({m.start() for lit in logscan.CANDIDATES for m in lit.finditer(data, 0, end)})
        pos = 0
        while self._expecting and pos < end:  # names owed from the previous block
            pos = self._feed_line(data, pos, end)
        for hit in hits:
            if hit < pos:
                continue
            nl_before = data.rfind(b"\n", pos, hit)
            start = pos if nl_before < 0 else nl_before + 1
            pos = self._feed_line(data, start, end)
            while self._expecting and pos < end:
                pos = self._feed_line(data, pos, end)

    def _feed_line(self, data: bytes, start: int, end: int) -> int:
        nl = data.find(b"\n", start, end)
        nl = end - 1 if nl < 0 else nl
        self.feed(data[start:nl])
        if self._expecting:
            self._waited += 1
            if self._waited > MAX_WAIT_LINES:
                # A cut log: the names will not come; stop reading line by line.
                for state in self._threads.values():
                    state.expect_names = 0
                self._expecting = 0
        return nl + 1

    # -- the state machine ------------------------------------------------------
    def feed(self, raw: bytes) -> None:
        ev = self.evidence
        if logscan.CUPTI_CONTENTION.search(raw):
            ev.cupti_contention = True
        line = logscan.parse_prefix(raw)
        if line is None:
            # The ERROR-level checker fails compilation; the status reaches Python's traceback.
            if logscan.CHECK_DISCARD.search(raw.decode("utf-8", "replace")):
                ev.pgle_lines += 1
                last = next((m for m in reversed(ev.modules) if m.checker_missing), None)
                if last is not None:
                    last.discarded = True
            return
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
                self._waited = 0
                if not state.expect_names:
                    self._expecting -= 1
                return
        self._message(msg, state, line.rank)

    def _message(self, msg: str, state: _Thread, rank: int | None) -> None:
        ev = self.evidence
        if m := logscan.FINGERPRINT.match(msg):
            state.fingerprint = (m.group("module"), m.group("fp"))
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
            state.current = ModuleEvidence(module, rank, fp, state.using, found_profile=True)
            ev.modules.append(state.current)
            state.using = None
            state.fingerprint = None
        elif m := logscan.CHECK_FOUND.match(msg):
            ev.pgle_lines += 1
            self._current(state, rank).checker_found = int(m.group("n"))
        elif m := logscan.CHECK_MISSING.match(msg):
            ev.pgle_lines += 1
            n = int(m.group("n"))
            self._current(state, rank).checker_missing = n
            if n and not state.expect_names:
                self._expecting += 1
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
        elif m := logscan.PARSE_FAILED.match(msg):
            ev.pgle_lines += 1
            ev.parse_errors.append(f"{m.group('path')}: {m.group('error')}")
        elif logscan.FDO_UNPARSABLE.match(msg):
            ev.pgle_lines += 1
            ev.parse_errors.append("fdo_profile: not a valid ProfiledInstructionsProto")
        elif m := logscan.MAY_NOT_APPLY.match(msg):
            ev.pgle_lines += 1
            if state.current is not None:
                state.current.note = f"XLA: profile may not apply: {m.group('why')}"

    def _current(self, state: _Thread, rank: int | None) -> ModuleEvidence:
        if state.current is None:
            # A checker block with no "Found profile" before it in this thread.
            state.current = ModuleEvidence(None, rank, found_profile=True)
            self.evidence.modules.append(state.current)
        return state.current


@dataclasses.dataclass
class Verdict:
    status: str
    modules: list[dict]
    reasons: list[str]
    evidence: Evidence


def judge(evidence: Evidence, *, platform: str | None = None, min_coverage: float = 0.9,
          accuracy_checker: bool = True) -> Verdict:
    """Turn evidence into per-module and overall statuses (README "Verdicts")."""
    modules = [_judge_module(m, min_coverage, accuracy_checker) for m in evidence.modules]
    reasons: list[str] = []
    if evidence.parse_errors:
        reasons += [f"XLA could not parse the profile: {e}" for e in evidence.parse_errors]
        status = "error"
    elif evidence.missing_files:
        reasons += [f"XLA found no profile file at {p}" for p in dict.fromkeys(evidence.missing_files)]
        status = "error"
    elif not modules and not evidence.reads:
        if platform and platform.lower() not in GPU_PLATFORMS:
            status = "not_applicable"
            reasons.append(
                f"backend {platform}: PGLE is an XLA:GPU feature, so no module used a profile and "
                "none could; run on an NVIDIA GPU to apply it.")
        else:
            status = "not_applied"
            reasons.append("no PGLE line in the log: XLA never read a profile (is the INFO log on, "
                           "TF_CPP_MIN_LOG_LEVEL=0, and did the profile flag reach XLA?).")
    elif not modules:
        status = "not_applied"
        reasons.append("XLA read the profile but no module reported using it.")
    else:
        counts = {s: sum(1 for m in modules if m["status"] == s) for s in STATUSES}
        status = overall_status(m["status"] for m in modules)
        reasons.append(
            f"{counts['applied']} of {len(modules)} module(s) applied the profile"
            + (f", {counts['partial']} partially" if counts["partial"] else "")
            + (f", {counts['not_applied']} not at all" if counts["not_applied"] else "") + ".")
    return Verdict(status, modules, reasons, evidence)


def overall_status(module_statuses) -> str:
    """All modules applied: applied; some applied or partial: partial; else not_applied."""
    statuses = list(module_statuses)
    if statuses and all(s == "applied" for s in statuses):
        return "applied"
    if any(s in ("applied", "partial") for s in statuses):
        return "partial"
    return "not_applied"


def _judge_module(m: ModuleEvidence, min_coverage: float, accuracy_checker: bool) -> dict:
    found, missing, coverage, notes = m.checker_found, m.checker_missing, None, []
    if m.no_profile_file:
        status = "not_applied"
        notes.append(f"no {m.fingerprint}.pb or .pbtxt in the profile directory")
    elif m.discarded:
        status = "not_applied"
        notes.append("the accuracy checker (ERROR level) discarded the profile")
        coverage = _ratio(found, missing)
    elif missing is not None:
        coverage = _ratio(found, missing)
        if coverage is None or coverage == 0:
            status = "not_applied"
        elif coverage >= min_coverage:
            status = "applied"
        else:
            status = "partial"
    elif accuracy_checker:
        # The checker is silent when nothing is missing: the profile covers the module.
        status, missing, coverage = "applied", 0, 1.0
    else:
        status = "applied"
        notes.append("accuracy checker off: coverage unknown")
    if m.note:
        notes.append(m.note)
    return {
        "module": m.module,
        "status": status,
        "instructions_found": found,
        "instructions_missing": missing,
        "coverage": coverage,
        "fingerprint": m.fingerprint,
        "profile_path": m.profile_path,
        "profile_found": not m.no_profile_file,
        "rank": m.rank,
        "missing_instructions": m.missing_names,
        "notes": notes,
    }


def _ratio(found: int | None, missing: int | None) -> float | None:
    if found is None or missing is None or found + missing == 0:
        return None
    return found / (found + missing)


def verdict_from_log(path: Path | str, **kwargs) -> Verdict:
    return judge(LogScanner().scan_file(path), **kwargs)
