"""`pgle verify LOG`: the PGLE verdict from a saved log (`-` reads stdin)."""

from __future__ import annotations

import dataclasses
import io
import os
import sys
from pathlib import Path
from typing import cast

from pgle.commands.options import VerdictOptions
from pgle.errors import BadInput, PgleError
from pgle.evidence import log_version
from pgle.evidence.xla_log import LogScanner
from pgle.phrases import ranks_phrase
from pgle.profiles import files
from pgle.report import Report
from pgle.verdicts import checker, collectives, require, sync_converted
from pgle.verdicts.across_ranks import judge_job
from pgle.verdicts.origin import Origin, path_matcher, same_file
from pgle.verdicts.pgle_applied import exit_code_for, judge, overall_status, summary_lines
from pgle.verdicts.rows import module_lines
from pgle.verdicts.statuses import Applied
from pgle.xla import versions


@dataclasses.dataclass(frozen=True)
class VerifyOptions:
    log: str
    profile: str | None = None
    platform: str | None = None
    verdict: VerdictOptions = VerdictOptions()
    accuracy_checker: bool = True
    jax: str | None = None  # the jax version that wrote the log (default: read from the log)
    # The GPU that ran it, where the log does not say (the SoL rule's device; default: assumed
    # Hopper/Blackwell, and said).
    device_kind: str | None = None


def verify(opts: VerifyOptions) -> Report:
    given = versions.parse_version(opts.jax) if opts.jax else None
    if opts.jax and given is None:
        raise BadInput(f"--jax {opts.jax} is not a version (e.g. 0.4.34).")
    absent = opts.profile is not None and not os.path.exists(opts.profile)
    source, unreadable = None, None
    if opts.profile and not absent:
        try:
            source = files.load_profile_source(opts.profile)
        except PgleError as e:
            # XLA may have read what pgle cannot (a .txt on jax <= 0.5.0, an empty directory,
            # a .pbtxt beside a good .pb): judge the log anyway.
            unreadable = str(e).rstrip(".")
    scanner = LogScanner()
    sniff = _DeviceSniffer(cast(io.BufferedReader, sys.stdin.buffer))
    if opts.log == "-":
        # typeshed types sys.stdin.buffer as BinaryIO, which has no readinto; CPython's is a
        # BufferedReader.
        evidence = scanner.scan_stream(sniff)
    else:
        path = Path(opts.log)
        if not path.is_file():
            raise BadInput(f"log {opts.log} does not exist or is not a file.")
        try:
            with path.open("rb") as f:
                sniff = _DeviceSniffer(f)
                evidence = scanner.scan_stream(sniff)
        except OSError as e:
            raise BadInput(f"cannot read log {opts.log}: {e.strerror}.") from None
    # Which jax wrote the log: --jax, else the log's own wording (never the installed jax:
    # the log may come from another machine).
    if given is not None:
        inference = log_version.Inference(given, given, (), (f"--jax {opts.jax}",))
        assumed = f"jax {versions.version_string(given)} (--jax)"
    else:
        inference = log_version.infer(
            evidence.wording,
            clones=any((m.sub_compile == "clone") for m in evidence.modules),
            candidates=any(m.by == "module id" for m in evidence.sub_compiles),
        )
        assumed = inference.describe()
    silence = checker.silence_of_log(
        inference,
        checker_off=not opts.accuracy_checker,
        checker_lines=evidence.checker_lines,
        discards=len(evidence.discards) + len(evidence.verifier_failures),
    )
    origin = None
    if opts.profile is not None:
        match = (
            (lambda p: _same_profile(p, source))
            if source is not None
            else path_matcher(opts.profile, (os.path.abspath(opts.profile),))
        )
        origin = Origin(profile_match=match, profile_given=opts.profile)
    verdict = judge(
        evidence,
        # The log's own device lines (`CpuDevice(id=0)`) name a backend --platform did not.
        platform=opts.platform or sniff.platform,
        min_coverage=opts.verdict.min_coverage,
        silence=silence,
        origin=origin,
        sol_fallback=_sol_expected(given, inference, opts.device_kind),
        renamed=_renamed(given, inference),
        device_kind=opts.device_kind,
    )
    if absent and verdict.status == Applied.NOT_APPLIED and not evidence.reads:
        # jax <= 0.5.3 says nothing when the profile file does not exist: pgle looks itself.
        verdict.status = Applied.ERROR
        verdict.reasons.insert(
            0,
            f"the profile {opts.profile} does not exist, and XLA gave no "
            "sign of reading any profile (jax <= 0.5.3 logs nothing for a "
            "missing file).",
        )
    report = Report(
        "verify",
        verdict.status,
        modules=verdict.modules,
        reasons=verdict.reasons,
        log_path=None if opts.log == "-" else str(Path(opts.log).absolute()),
    )
    report.details.update(verdict.details)
    report.details["jax_assumed"] = assumed
    ranked = sorted({m["rank"] for m in verdict.modules if m.get("rank") is not None})
    if (
        ranked
        and verdict.status != Applied.ERROR
        and all(m.get("rank") is not None for m in verdict.modules)
    ):
        # An `srun --label` log: one verdict per module across the ranks that logged it.
        by_rank = {r: [m for m in verdict.modules if m["rank"] == r] for r in ranked}
        status, modules, reasons = judge_job(by_rank, {r: None for r in ranked}, {})
        reasons = divergent_fingerprints(by_rank) + reasons
        report.status, report.modules, report.reasons = status, modules, reasons
        report.details["ranks"] = [
            {"rank": r, "status": overall_status(m["status"] for m in by_rank[r])} for r in ranked
        ]
        report.summary.append(f"verdict: {status}: " + " ".join(reasons[:1]))
        report.summary += module_lines(modules)
    else:
        report.summary += summary_lines(verdict)
    if given is None and (evidence.pgle_lines or evidence.modules):
        report.summary.append(
            f"assumed the log was written by {assumed}; pass --jax to say which jax wrote it"
        )
    newer = versions.newer_than_verified(given if given is not None else inference.low)
    if newer:
        report.warnings.append(newer)
    if absent and verdict.status != Applied.ERROR:
        report.warnings.append(f"the profile {opts.profile} does not exist (any more)")
    if unreadable:
        report.warnings.append(
            f"pgle cannot read the profile ({unreadable}); the verdict rests "
            "on the log alone, since XLA may have read it"
        )
    if source is not None:
        report.profile = source.to_dict()
    report.exit_code = exit_code_for(
        report.status, 0, opts.verdict.require_applied, verdict.details.get("coverage_unknown", 0)
    )
    if report.exit_code and opts.verdict.require_applied:
        report.summary.append(
            require.require_applied_line(
                report.status, verdict.details.get("coverage_unknown") or 0
            )
        )
    require.enforce(report, opts.verdict.require)
    return report


def divergent_fingerprints(by_rank: dict[int, list[dict]]) -> list[str]:
    """Sentences for modules whose fingerprint differs between ranks: the ranks compiled
    different HLO (flags, per-rank autotuning), so a directory keyed by one rank's
    fingerprints misses on the others."""
    seen: dict[str, dict[str, list[int]]] = {}
    for rank, rows in sorted(by_rank.items()):
        for m in rows:
            if m.get("module") and m.get("fingerprint"):
                seen.setdefault(m["module"], {}).setdefault(m["fingerprint"], []).append(rank)
    out = []
    for module, fps in seen.items():
        if len(fps) > 1:
            parts = "; ".join(f"{fp} on {ranks_phrase(rs)}" for fp, rs in fps.items())
            out.append(
                f"the ranks compiled different programs for {module}: its fingerprint "
                f"is {parts} (the HLO before scheduling differs: flags or per-rank "
                "autotuning), so a per-module profile keyed by one rank's fingerprint "
                "is not found on the others."
            )
    return out


def _same_profile(read_path: str, source: files.ProfileSource) -> bool:
    """A read matches if it is the profile itself, or pgle's content-addressed copy of it.

    XLA logs the path exactly as it was given (relative stays relative, jax 0.4.34-0.10.2):
    a relative one is compared as the workload saw it, from its working directory, which
    verify cannot know; so it matches when it resolves from here or ends the profile's path."""
    name = Path(read_path).name
    if read_path.startswith("fdo_profile"):
        return True
    if Path(read_path) == source.path or str(source.path) in read_path:
        return True
    # The same file through another path (a symlink either way, a bind mount): compared as
    # files, not strings; in directory mode the read is a file inside the directory.
    if same_file(read_path, str(source.path)) or (
        source.kind == "directory" and same_file(os.path.dirname(read_path), str(source.path))
    ):
        return True
    read = Path(read_path)
    if not read.is_absolute():
        mine = Path(os.path.abspath(source.path))
        if Path(os.path.abspath(read)) == mine:
            return True
        parts = [p for p in read.parts if p != "."]
        if parts and ".." not in parts and mine.parts[-len(parts) :] == tuple(parts):
            return True
        if (
            source.kind == "directory"
            and len(parts) > 1
            and mine.parts[-(len(parts) - 1) :] == tuple(parts[:-1])
        ):
            return any(f.name == name for f in source.files)
    if source.sha256[:16] in read_path:
        return True
    return source.kind == "directory" and any(f.name == name for f in source.files)


def _sol_expected(
    given: tuple[int, ...] | None,
    inference: log_version.Inference,
    device_kind: str | None = None,
) -> bool | None:
    """Whether the jax that wrote the log prices unprofiled instructions with XLA's SoL model:
    from --jax, else only when every version the log's wording allows agrees (None: unknown,
    and then only a module's own `PGLE fallback: using SolLatencyEstimator` line says so);
    never on a device --device-kind names that is not Hopper/Blackwell."""
    if device_kind is not None and not collectives.SOL_DEVICES.search(device_kind):
        return False
    if given is not None:
        return collectives.sol_fallback_expected(given, device_kind)
    return inference.since(collectives.SOL_FALLBACK_SINCE, collectives.LAST_WITHOUT_SOL_FALLBACK)


def _renamed(given: tuple[int, ...] | None, inference: log_version.Inference) -> bool | None:
    """Whether the jax that wrote the log renames an async collective it makes synchronous
    after scheduling (pgle.verdicts.sync_converted): from --jax, else only when every version
    the log's wording allows agrees (None: unknown)."""
    if given is not None:
        return sync_converted.renames(given)
    return inference.since(sync_converted.RENAMED_SINCE, sync_converted.LAST_KEEPING_NAMES)


class _DeviceSniffer(io.RawIOBase):
    """The log as the scanner reads it, with the backend its first lines name: jax's PjRt
    client logs each device at start-up (`Addressable PjRt-IFRT device: CpuDevice(id=0)`,
    jax 0.4.3x-0.10.2), an INFO line the XLA scanner's pre-filter skips. A GPU run may start
    a CPU client too: a CUDA device wins."""

    HEAD = 4 << 20  # the device lines come before the first compile

    def __init__(self, raw: io.BufferedReader) -> None:
        super().__init__()
        self.raw, self.seen, self.found = raw, 0, set[str]()
        self._tail = b""

    @property
    def platform(self) -> str | None:
        return "cuda" if "cuda" in self.found else "cpu" if "cpu" in self.found else None

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.raw.readinto(b) or 0
        if n and self.seen < self.HEAD:
            data = self._tail + bytes(memoryview(b)[:n])
            self.found.update(name for token, name in _DEVICE_TOKENS if token in data)
            self._tail = data[-32:]
            self.seen += n
        return n


_DEVICE_TOKENS = ((b"device: CpuDevice(", "cpu"), (b"device: CudaDevice(", "cuda"))
