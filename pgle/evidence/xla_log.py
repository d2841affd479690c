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

What the real XLA:GPU compiler of jax 0.4.35-0.12.0.1 prints, and how each line is read here,
is in tests/data/xla_gpu/README.md (captured by the deviceless lane) and docs/gpu-validation.md.

Modules XLA schedules while compiling another one are told apart from the workload's own
(`sub_compiles`): a module in a thread whose HLO module id is larger than that of a module
scheduled after it in the same thread was created during that later module's compile (ids
grow as XLA creates modules; the `Fingerprint before LHS ... M(<id>)` VLOG line shows it):
the collective combiner's `<M>-clone` (jax 0.7.2-0.8.3) and, from jax 0.11, the autotuner's
candidate modules (`gemm_fusion_dot.2(6)`, `loop_reduce_fusion(1330)`, ...), which each get a
profile lookup and, with one file, their own `Found profile` and checker block.
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Iterable
from pathlib import Path

from pgle.evidence import logscan
from pgle.xla.instruction_kinds import classify

MAX_MISSING_NAMES = 50
_FINGERPRINT_FILE = re.compile(r"^([0-9a-f]{32})\.(pb|pbtxt)$")
CHUNK = 8 << 20
# Of a line longer than LONG_LINE only its start and its last LONG_LINE_TAIL bytes are scanned.
LONG_LINE = 8 << 20
LONG_LINE_TAIL = 64 << 10
# Module names JAX gives the modules it compiles (`jit_<fn>`, `pmap_<fn>`, ...): the fallback
# that tells the workload's modules from XLA's own when no module id was logged.
_JAX_MODULE_NAME = re.compile(r"^(?:jit|pjit|pmap|xmap|xla_computation|shard_map)_")


def _literal_start(pattern: re.Pattern[str]) -> str:
    """The text every match of an anchored pattern starts with (up to its first operator)."""
    text = pattern.pattern.removeprefix("^")
    for i, c in enumerate(text):
        if c in "\\()[]?*+{|.$^":
            return text[: i - 1] if c in "?*{" else text[:i]
    return text


# What every message _message acts on starts with: one C-level startswith, instead of fifteen
# regex matches, for the scheduler's other lines, which the pre-filter keeps (jax >= 0.7.2 logs
# `Using unified latency estimator` for every module).
_MESSAGE_STARTS = tuple(
    _literal_start(p)
    for p in (
        logscan.FINGERPRINT,
        logscan.USING_FDO,
        logscan.USING_PROFILE,
        logscan.FOUND_PROFILE,
        logscan.CHECK_FOUND,
        logscan.CHECK_MISSING,
        logscan.FILE_MISSING,
        logscan.PARSE_FAILED,
        logscan.PARSE_FAILED_OLD,
        logscan.FDO_UNPARSABLE,
        logscan.MAY_NOT_APPLY,
        logscan.UNKNOWN_FLAGS,
        logscan.SOL_FALLBACK,
        logscan.MISSED_COST,
        logscan.LHS_UNSET,
        logscan.CHECKER_WITHOUT_PATH,
        logscan.UNIFIED_ESTIMATOR,
        logscan.ADDED_PAIR,
        logscan.ASYNC_START_SEEN,
    )
)
# What the pre-filter keeps of the XLA:GPU files' own lines (logscan.line_starts), and what
# feed() reads of them: the messages above, and the checker's missing names ("  <name>",
# CHECK_NAME). Both sides use this one tuple, so the scan of a file and the feed of every line
# see the same lines.
_KEPT_MESSAGES = (*_MESSAGE_STARTS, "  ")
_KEPT_MESSAGE_BYTES = tuple(s.encode() for s in _KEPT_MESSAGES)


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
    module_id: int | None = None  # XLA's HloModule id, from the VLOG fingerprint line
    thread: str | None = None  # the logging thread's id, where the prefix carries one
    # Only the VLOG fingerprint line: XLA looked for no profile, or found none and said
    # nothing (a directory without the module's file on jax <= 0.5.x; a missing file).
    fingerprint_only: bool = False
    # Scheduled while XLA compiled another module: "clone" (the collective combiner's
    # <M>-clone, jax 0.7.2-0.8.3) or "candidate" (an autotuner candidate, jax >= 0.11);
    # `parent`: the module whose compile it belongs to; `by`: how that was told.
    sub_compile: str | None = None
    parent: str | None = None
    by: str | None = None
    fallback_from: str | None = None  # the unreadable <fp>.pbtxt XLA fell back from to <fp>.pb
    # Every missing collective / host copy / async wrapper of unknown kind (never compute,
    # pgle.xla.instruction_kinds), beyond the MAX_MISSING_NAMES cap of missing_names: the
    # verdict must see each one (pgle.verdicts.collectives).
    missing_communication: list[str] = dataclasses.field(default_factory=list)
    # VLOG 3 of convert_async_collectives_to_sync, after this module's scheduling: the async
    # collective starts the pass looked at (`Found async start %S = ...`) and those it made
    # synchronous (`Added pair: {S, D`) (pgle.verdicts.sync_converted).
    async_starts_seen: list[str] = dataclasses.field(default_factory=list)
    converted_pairs: list[str] = dataclasses.field(default_factory=list)
    # The compile of this module failed: XLA's own words (the exception's status and message:
    # `INVALID_ARGUMENT: Found 7 missing instructions. Discarding the profile.`, or an HLO
    # verifier failure). Such a module is never applied, whatever its checker said.
    compile_failed: str | None = None


@dataclasses.dataclass
class _Thread:
    fingerprint: tuple[str, str, int | None] | None = None  # (module, fp, id) of the VLOG line
    using: str | None = None
    current: ModuleEvidence | None = None
    expect_names: int = 0
    sol_fallback: bool = False
    unreadable: tuple[int, str, str] | None = None  # (parse error's index, fingerprint, path)
    fallback_from: str | None = None
    # The module whose post-scheduling lines (`Added pair`) follow: the newest module of the
    # thread, known only where the VLOG fingerprint line marks where each module begins (a
    # module that reads no profile logs nothing else, and its pairs must not land on the
    # previous one).
    scheduled: ModuleEvidence | None = None
    began: bool = False  # the newest module began with its fingerprint line


@dataclasses.dataclass
class Evidence:
    modules: list[ModuleEvidence] = dataclasses.field(default_factory=list)
    reads: list[str] = dataclasses.field(default_factory=list)  # `Using PGLE profile from`
    missing_files: list[str] = dataclasses.field(default_factory=list)
    parse_errors: list[str] = dataclasses.field(default_factory=list)
    # "Found N missing instructions. Discarding the profile." (ERROR strictness): the compile
    # failed.
    discards: list[str] = dataclasses.field(default_factory=list)
    # Compiles that failed in XLA's HLO verifier (`FAILED_PRECONDITION: during context [hlo
    # verifier]: ...`; jax >= 0.11 under ERROR strictness): XLA's words, one per failure.
    verifier_failures: list[str] = dataclasses.field(default_factory=list)
    unknown_flags: list[str] = dataclasses.field(default_factory=list)  # XLA aborted on them
    info_lines: int = 0  # XLA INFO lines seen: none while checker lines show = INFO hidden
    checker_lines: int = 0  # accuracy-checker lines (WARNING/ERROR: shown at level 1 too)
    lhs_unset_warnings: int = 0
    cupti_contention: bool = False
    pgle_lines: int = 0
    bytes_scanned: int = 0
    fingerprint_lines: int = 0  # VLOG on: module names and ids are logged
    checker_without_path: int = 0  # "accuracy checker is set to WARN, but no profile path"
    # `<fp>.pbtxt` unreadable, XLA read `<fp>.pb` instead (directory mode): not an error.
    fallbacks: list[str] = dataclasses.field(default_factory=list)
    sub_compiles: list[ModuleEvidence] = dataclasses.field(default_factory=list)
    # Thread ids on XLA:GPU scheduler and checker lines (absl prefix, or tsl with
    # TF_CPP_LOG_THREAD_ID): which threads of which process logged them.
    thread_ids: list[str] = dataclasses.field(default_factory=list)
    # The log's own wording, for telling which jax wrote it (pgle.evidence.log_version):
    # {"prefix": "tsl"|"absl"|"tsl+absl", "<message kind>": source line number, ...}.
    wording: dict[str, object] = dataclasses.field(default_factory=dict)
    long_lines: int = 0  # lines longer than LONG_LINE, scanned by their start and tail only
    # `Added pair` lines (VLOG 3 of convert_async_collectives_to_sync): every one, and those
    # that could not be given to a module (no fingerprint line told where modules begin).
    added_pairs: int = 0
    unattributed_pairs: int = 0


class LogScanner:
    """Feeds on log lines (bytes); keeps per-thread state, since modules compile in parallel."""

    def __init__(self) -> None:
        self.evidence = Evidence()
        # (rank, thread id) -> that thread's state
        self._threads: dict[tuple[int | None, str | None], _Thread] = {}
        self._line: logscan.LogLine | None = None
        self._finished = False
        # The thread whose module began last (its VLOG fingerprint line, or `Found profile`):
        # a failed compile's exception line names no module, and it follows the scheduling of
        # the module whose compile failed.
        self._newest: tuple[_Thread, int | None, str | None] | None = None

    # -- input --------------------------------------------------------------
    def scan_file(self, path: Path | str) -> Evidence:
        with open(path, "rb", buffering=0) as f:
            return self.scan_stream(f)

    def scan_stream(self, f: io.RawIOBase | io.BufferedIOBase) -> Evidence:
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
                    self.evidence.long_lines += 1
                    self._scan_block(buf, kept)
                    long_line = True
                buf[:LONG_LINE_TAIL] = buf[kept - LONG_LINE_TAIL : kept]  # same length: no resize
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
                long_line = False
                self._scan_block(buf, cut)
                buf[: end - cut] = buf[cut:end]  # same length: the buffer is not resized
                kept = end - cut
            else:
                kept = end
        if kept:  # the last line, without a newline
            self._scan_block(buf, kept)
        return self.finish()

    def feed_lines(self, lines: Iterable[bytes]) -> Evidence:
        for line in lines:
            self.feed(line)
        return self.finish()

    def _scan_block(self, data: bytearray, end: int) -> None:
        """Feed each line of data[:end] that holds a pre-filter literal (logscan.line_starts):
        a block without one costs a few C-level searches and no Python work per line."""
        for start in logscan.line_starts(data, end, _KEPT_MESSAGE_BYTES):
            nl = data.find(b"\n", start, end)
            self.feed(bytes(data[start : end if nl < 0 else nl]))

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
                ev.discards.append(text[m.start() :].strip())
                self._mark_discarded(_status_and_message(text, m.start()))
            elif m := logscan.VERIFIER_FAILED.search(text):
                ev.pgle_lines += 1
                why = text[m.start() :].strip()
                ev.verifier_failures.append(why)
                self._mark_failed(why)
            return
        if line.severity == "I":
            ev.info_lines += 1
        if line.file in _XLA_GPU_FILES and not line.message.startswith(_KEPT_MESSAGES):
            return  # a line of theirs no handler reads (the pre-filter drops it too)
        key = (line.rank, line.thread)
        state = self._threads.get(key)
        if state is None:
            state = self._threads[key] = _Thread()
        if (
            line.thread is not None
            and line.thread not in ev.thread_ids
            and len(ev.thread_ids) < 256
            and line.file in _XLA_GPU_FILES
        ):
            ev.thread_ids.append(line.thread)
        msg = line.message
        if state.expect_names:
            m = logscan.CHECK_NAME.match(msg)
            if m:
                if state.current is not None:
                    name = m.group("name")
                    if len(state.current.missing_names) < MAX_MISSING_NAMES:
                        state.current.missing_names.append(name)
                    if classify(name).never_compute:
                        state.current.missing_communication.append(name)
                state.expect_names -= 1
                return
        self._line = line
        self._message(msg, state, line.rank)

    def _seen(self, kind: str) -> None:
        """The log's wording: which kind of line it printed, from which source line, and in
        which prefix style (what tells the jax version that wrote it)."""
        words = self.evidence.wording
        line = self._line
        assert line is not None  # set by feed() before any message is read
        if kind not in words:
            words[kind] = line.lineno
        style = "absl" if line.absl else "tsl"
        if line.file == "gpu_hlo_schedule.cc":
            words.setdefault("prefix", style)
        elif kind.startswith("checker"):
            words.setdefault("checker_prefix", style)

    def _message(self, msg: str, state: _Thread, rank: int | None) -> None:
        """Hand `msg` to the first handler whose pattern matches it; the order matters where
        two patterns share a start (USING_FDO before USING_PROFILE)."""
        if not msg.startswith(_MESSAGE_STARTS):
            return  # the scheduler's other lines
        for match, handle in (
            (logscan.FINGERPRINT.match, self._on_fingerprint),
            (logscan.USING_FDO.match, self._on_using_fdo),
            (logscan.USING_PROFILE.match, self._on_using_profile),
            (logscan.FOUND_PROFILE.match, self._on_found_profile),
            (logscan.CHECK_FOUND.match, self._on_check_found),
            (logscan.CHECK_MISSING.match, self._on_check_missing),
            (logscan.FILE_MISSING.match, self._on_file_missing),
            (logscan.PARSE_FAILED.match, self._on_parse_failed),
            (logscan.PARSE_FAILED_OLD.match, self._on_parse_failed),
            (logscan.FDO_UNPARSABLE.match, self._on_fdo_unparsable),
            (logscan.MAY_NOT_APPLY.match, self._on_may_not_apply),
            (logscan.UNKNOWN_FLAGS.match, self._on_unknown_flags),
            (logscan.SOL_FALLBACK.match, self._on_sol_fallback),
            (logscan.MISSED_COST.match, self._on_missed_cost),
            (logscan.LHS_UNSET.match, self._on_lhs_unset),
            (logscan.CHECKER_WITHOUT_PATH.match, self._on_checker_without_path),
            (logscan.UNIFIED_ESTIMATOR.match, self._on_unified_estimator),
            (logscan.ADDED_PAIR.match, self._on_pair_or_start),
            (logscan.ASYNC_START_SEEN.match, self._on_pair_or_start),
        ):
            if m := match(msg):
                handle(m, state, rank)
                return

    # -- the handlers: one per kind of line, given the match, the thread's state, the rank --
    def _on_fingerprint(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        ev = self.evidence
        self._flush_fingerprint(state, rank, self._thread())
        state.fingerprint = (
            m.group("module"),
            m.group("fp"),
            int(m.group("id")) if m.group("id") else None,
        )
        state.scheduled, state.began = None, True
        self._newest = (state, rank, self._thread())
        ev.pgle_lines += 1
        ev.fingerprint_lines += 1
        self._seen("fingerprint")

    def _on_using_fdo(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        ev = self.evidence
        state.using = f"fdo_profile ({m.group('fmt')})"
        ev.reads.append(state.using)
        ev.pgle_lines += 1
        self._seen("using_fdo_for_module" if " for module " in m.string else "using_fdo")

    def _on_using_profile(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        ev = self.evidence
        state.using = m.group("path")
        ev.reads.append(state.using)
        ev.pgle_lines += 1
        self._seen("using")
        fm = _FINGERPRINT_FILE.match(Path(state.using).name)
        if state.unreadable and fm and fm.group(2) == "pb" and fm.group(1) == state.unreadable[1]:
            # <fp>.pbtxt did not parse and XLA read <fp>.pb: the normal lookup order.
            # The path from the parse-failure line: XLA's error text repeats the path, so
            # splitting "path: error" at a ": " breaks on a folder whose name holds one.
            index, _, state.fallback_from = state.unreadable
            ev.fallbacks.append(state.fallback_from)
            ev.parse_errors[index] = ""  # dropped in finish()
        state.unreadable = None

    def _on_found_profile(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        ev = self.evidence
        ev.pgle_lines += 1
        self._seen("found_profile_named" if m.group("module") else "found_profile")
        module, fp, module_id = m.group("module"), None, None
        if state.fingerprint:
            module = module or state.fingerprint[0]
            fp, module_id = state.fingerprint[1], state.fingerprint[2]
        if fp is None and state.using:
            fm = _FINGERPRINT_FILE.match(Path(state.using).name)
            fp = fm.group(1) if fm else None
        state.current = ModuleEvidence(
            module,
            rank,
            fp,
            state.using,
            found_profile=True,
            ordinal=sum(1 for x in ev.modules if x.found_profile) + 1,
            module_id=module_id,
            thread=self._thread(),
            fallback_from=state.fallback_from,
        )
        ev.modules.append(state.current)
        state.current.sol_fallback, state.sol_fallback = state.sol_fallback, False
        # Where this module's own fingerprint line began it, its post-scheduling lines
        # are its own; without one, nothing tells where the next module begins.
        state.scheduled = state.current if state.fingerprint is not None else None
        state.began = state.fingerprint is not None
        state.using = state.fingerprint = state.fallback_from = None
        self._newest = (state, rank, self._thread())

    def _on_check_found(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        self.evidence.pgle_lines += 1
        self.evidence.checker_lines += 1
        self._seen("checker_found")
        self._block_owner(state, rank).checker_found = int(m.group("n"))

    def _on_check_missing(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        self.evidence.pgle_lines += 1
        self.evidence.checker_lines += 1
        self._seen("checker_missing")
        n = int(m.group("n"))
        self._current(state, rank).checker_missing = n
        state.expect_names = n

    def _on_file_missing(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        ev = self.evidence
        ev.pgle_lines += 1
        self._seen("file_missing")
        path = m.group("path")
        fm = _FINGERPRINT_FILE.match(Path(path).name)
        if fm is None:
            ev.missing_files.append(path)
        elif fm.group(2) == "pb":
            # XLA looks for <fp>.pbtxt, then <fp>.pb: both gone means no profile for it.
            module, module_id = (
                (state.fingerprint[0], state.fingerprint[2]) if state.fingerprint else (None, None)
            )
            ev.modules.append(
                ModuleEvidence(
                    module,
                    rank,
                    fm.group(1),
                    path,
                    no_profile_file=True,
                    module_id=module_id,
                    thread=self._thread(),
                )
            )
            state.fingerprint = None

    def _on_parse_failed(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        ev = self.evidence
        ev.pgle_lines += 1
        self._seen("parse_failed" if m.string.startswith("Tried") else "parse_failed_old")
        ev.parse_errors.append(f"{m.group('path')}: {m.group('error')}")
        fm = _FINGERPRINT_FILE.match(Path(m.group("path")).name)
        if fm and fm.group(2) == "pbtxt":
            state.unreadable = (len(ev.parse_errors) - 1, fm.group(1), m.group("path"))

    def _on_fdo_unparsable(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        self.evidence.pgle_lines += 1
        self._seen("fdo_unparsable_old" if "prase" in m.string else "fdo_unparsable")
        self.evidence.parse_errors.append("fdo_profile: not a valid ProfiledInstructionsProto")

    def _on_may_not_apply(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        self.evidence.pgle_lines += 1
        self._seen("may_not_apply")
        if state.current is not None:
            if m.group("name"):
                state.current.module = state.current.module or m.group("module")
                state.current.not_in_module.append(m.group("name"))
            else:
                state.current.note = f"XLA: profile may not apply: {m.group('why')}"

    def _on_unknown_flags(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        self.evidence.pgle_lines += 1
        # jax <= 0.5.0 lists the rest of XLA_FLAGS after two spaces.
        listed = "  " in m.string.split(": ", 1)[-1]
        self._seen("unknown_flags_listed" if listed else "unknown_flag")
        self.evidence.unknown_flags += m.group("flags").split()

    def _on_sol_fallback(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        # Logged before "Found profile for module": remember it for that module.
        self._seen("sol_fallback")
        state.sol_fallback = True

    def _on_missed_cost(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        if state.current is not None:
            state.current.missed_costs += 1

    def _on_lhs_unset(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        self._seen("lhs_unset")
        self.evidence.lhs_unset_warnings += 1

    def _on_checker_without_path(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        self._seen("checker_without_path")
        self.evidence.checker_without_path += 1

    def _on_unified_estimator(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        self._seen("unified_estimator")

    def _on_pair_or_start(self, m: re.Match[str], state: _Thread, rank: int | None) -> None:
        pair = m.string.startswith("Added")
        self._seen("added_pair" if pair else "async_start_seen")
        self.evidence.added_pairs += pair
        if state.scheduled is not None:
            (state.scheduled.converted_pairs if pair else state.scheduled.async_starts_seen).append(
                m.group("start")
            )
        elif not state.began:
            self.evidence.unattributed_pairs += pair
        # else: a module that read no profile (its fingerprint line began it): no row

    def _thread(self) -> str | None:
        """The thread id of the line being read."""
        assert self._line is not None  # set by feed() before any message is read
        return self._line.thread

    def _flush_fingerprint(self, state: _Thread, rank: int | None, thread: str | None) -> None:
        """The thread's previous module printed its fingerprint line and nothing else."""
        if state.fingerprint is not None:
            module, fp, module_id = state.fingerprint
            self.evidence.modules.append(
                ModuleEvidence(
                    module,
                    rank,
                    fp,
                    None,
                    module_id=module_id,
                    thread=thread,
                    fingerprint_only=True,
                )
            )
            state.fingerprint = None

    def _mark_discarded(self, why: str) -> None:
        """The module whose compile the ERROR checker failed: the newest with a checker block
        since the last failure; where XLA printed no block (jax 0.4.38/0.5.0), the newest
        module that read the profile."""
        ev = self.evidence
        done = max((i for i, m in enumerate(ev.modules) if m.compile_failed), default=-1)
        since = [m for i, m in enumerate(ev.modules) if i > done and m.found_profile]
        last = next((m for m in reversed(since) if m.checker_missing), None)
        if last is None and since:
            last = since[-1]
        if last is not None:
            last.discarded = True
            last.compile_failed = why

    def _mark_failed(self, why: str) -> None:
        """A compile that failed after scheduling (the HLO verifier): the module that began
        last, in any thread (the exception line has none), if its compile has not already
        failed. A module that logged only its fingerprint gets its row here."""
        if self._newest is None:
            return
        state, rank, thread = self._newest
        self._flush_fingerprint(state, rank, thread)
        module = next(
            (m for m in reversed(self.evidence.modules) if m.rank == rank and m.thread == thread),
            None,
        )
        if module is not None and module.compile_failed is None:
            module.compile_failed = why
        self._newest = None

    def finish(self) -> Evidence:
        """After the last line (idempotent): modules that logged only their fingerprint,
        fallbacks, and the modules XLA scheduled while compiling others."""
        if self._finished:
            return self.evidence
        self._finished = True
        ev = self.evidence
        for (rank, thread), state in self._threads.items():
            self._flush_fingerprint(state, rank, thread)
        ev.parse_errors = [e for e in ev.parse_errors if e]
        _classify_sub_compiles(ev)
        ev.sub_compiles = [m for m in ev.modules if m.sub_compile == "candidate"]
        ev.modules = [m for m in ev.modules if m.sub_compile != "candidate"]
        return ev

    def _block_owner(self, state: _Thread, rank: int | None) -> ModuleEvidence:
        """The module a new checker block belongs to.

        jax 0.4.34 logs the block in absl style (with a thread id) after tsl-style "Found
        profile" lines (without one): it belongs to the newest thread-less module that has
        no block yet."""
        plain = self._threads.get((rank, None))
        if (
            plain is not None
            and plain is not state
            and plain.current is not None
            and plain.current is not state.current
            and plain.current.checker_found is None
            and plain.current.checker_missing is None
        ):
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


_XLA_GPU_FILES = ("gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc")


def _classify_sub_compiles(ev: Evidence) -> None:
    """Mark the modules XLA scheduled while compiling another one (see the module's doc).

    With module ids (VLOG on): per thread, a module whose id is larger than that of a module
    scheduled after it was created during that module's compile. Without ids: where the log
    names modules the way JAX does (`jit_<fn>`), the modules named otherwise are XLA's own;
    `<M>-clone` is always the combiner's copy of M."""
    threads: dict[tuple[int | None, str | None], list[ModuleEvidence]] = {}
    for m in ev.modules:
        threads.setdefault((m.rank, m.thread), []).append(m)
    for seq in threads.values():
        parent: ModuleEvidence | None = None
        for m in reversed(seq):
            if m.module_id is None:
                continue
            if parent is not None and m.module_id > parent.module_id:  # type: ignore[operator]
                m.sub_compile, m.parent, m.by = _kind(m.module), parent.module, "module id"
            else:
                parent = m
    jax_named = any(m.module and _JAX_MODULE_NAME.match(m.module) for m in ev.modules)
    for m in ev.modules:
        if m.sub_compile or not m.module:
            continue
        if m.module.endswith("-clone"):
            m.sub_compile, m.parent, m.by = "clone", m.module[: -len("-clone")], "name"
        elif jax_named and m.module_id is None and not _JAX_MODULE_NAME.match(m.module):
            m.sub_compile, m.by = "candidate", "name"


def _status_and_message(text: str, start: int) -> str:
    """XLA's status code and message from an exception line: `INVALID_ARGUMENT: Found ...`
    out of `jax.errors.JaxRuntimeError: INVALID_ARGUMENT: Found ...`."""
    head = text[:start].rstrip()
    code = head.rsplit(" ", 1)[-1] if head.endswith(":") else ""
    code = code if code[:-1].isupper() and code[:-1].replace("_", "").isalpha() else ""
    return f"{code} {text[start:].strip()}".strip()


def _kind(module: str | None) -> str:
    return "clone" if module and module.endswith("-clone") else "candidate"
