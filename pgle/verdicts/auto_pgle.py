"""Verdicts of the auto-PGLE family: `auto` (was each module recompiled with a profile),
`prewarm` (did a PGLE-optimized cache entry land on disk) and `nsys` (did the Nsight run
load it), from the facts pgle.evidence.jax_log reads out of JAX's own log records.

JAX profiles each jitted module on its first N executions (JAX_PGLE_PROFILING_RUNS) and on
execution N+1 recompiles it with the aggregated profile (jax/_src/pjit.py,
jax/_src/profiler.py, jax 0.10.2); cache entries are written from process 0 only
(jax/_src/compilation_cache.py).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from pgle.errors import EXIT_NOT_VERIFIED
from pgle.phrases import all_of, plural
from pgle.report import Report
from pgle.verdicts.rows import AutoRow, NsysRow, PrewarmRow
from pgle.verdicts.statuses import Applied, Loaded, Optimized

if TYPE_CHECKING:  # annotations only: the events modules cost `pgle verify` start-up
    from pgle.evidence import jax_log
    from pgle.evidence.event_kinds import PgleSessionError, ScriptTrace

STATUS_OPTIMIZED = Optimized.OPTIMIZED
STATUS_NOT_OPTIMIZED = Optimized.NOT_OPTIMIZED
STATUS_EMPTY_PROFILE = Optimized.EMPTY_PROFILE
STATUS_LOADED = Loaded.LOADED_OPTIMIZED
STATUS_FELL_BACK = Loaded.FELL_BACK
STATUS_COMPILED_ANEW = Loaded.COMPILED_ANEW


# -- wording --------------------------------------------------------------------------
def times(n: int) -> str:
    return plural(n, "time")


def count_line(modules: list[dict[str, Any]], ok: str, what: str) -> str:
    n = sum(1 for m in modules if m["status"] == ok)
    return f"{n} of {plural(len(modules), 'module')} {what}"


def empty_profile_cause(platform: str | None) -> str:
    if platform and platform not in ("gpu", "cuda"):
        return (
            f"the backend is {platform}: the JAX profiler records no device kernels there, so "
            "every profile is empty (PGLE is an NVIDIA GPU feature)"
        )
    return (
        "CUPTI contention (Nsight Systems, DCGM or another profiler attached to the GPU), or "
        "kernels hidden in CUDA graphs; profile with nothing else attached"
    )


# -- auto -----------------------------------------------------------------------------
PROFILER_COLLISION = (
    "ALREADY_EXISTS",
    "Another profiling session active",
    "Profile has already been started",
)


@dataclasses.dataclass(frozen=True)
class Collision:
    """Auto PGLE's profiling session could not start: another one held the profiler (jax
    0.10.2 runs one per process: `ALREADY_EXISTS: Another profiling session active`, raised
    out of the jitted call)."""

    kind: str  # threads | script | other
    text: str  # the report's reason
    row: str  # each affected module's reason, briefly
    fix: str
    modules: frozenset[str]  # the modules whose session failed (empty: unknown, log only)


THREADS_FIX = (
    "profile with manual PGLE instead (`pgle tune`, or `pgle collect` then `pgle run`: "
    "one window covers every thread), or keep auto PGLE out of the worker threads "
    "(compile their functions ahead of time, `jax.jit(f).lower(...).compile()`, "
    "which auto PGLE never profiles)"
)
SCRIPT_FIX = (
    "turn the script's own profiler off for pgle auto, or start it after auto PGLE's "
    "profiled executions (--runs)"
)


def profiler_collision(
    log_path: str | os.PathLike[str],
    session_errors: Sequence[PgleSessionError],
    script_traces: Sequence[ScriptTrace],
) -> Collision | None:
    """Did auto PGLE's profiling collide with another profiling session, and whose?

    Only a failure that happened counts: the harness's `pgle_session_error` records
    (`session_errors`; pgle.launch.jax_internals: the failing module, its thread, and the
    module another thread was profiling then), else JAX's ALREADY_EXISTS in the log. A script
    that starts its own profiler when auto PGLE has finished profiling collides with nothing."""
    errors = list(session_errors)
    said = bool(errors)
    if not said:
        try:
            with open(log_path, "rb") as f:
                text = f.read()
        except OSError:
            text = b""
        said = any(m.encode() in text for m in PROFILER_COLLISION)
    if not said:
        return None
    failed = frozenset(str(r.module) for r in errors if r.module)
    count = f"{plural(len(errors), 'profiling session')} failed" if errors else ""
    threads = [r for r in errors if r.holder_thread is not None]
    if threads:
        r = threads[0]
        pairs = {(str(e.module), str(e.holder_module)) for e in threads}
        return Collision(
            "threads",
            f"jitted functions ran at once in several threads, and auto PGLE profiles one "
            f"execution at a time per process: {r.module} (thread {r.thread}) "
            f"could not start its profiling session while {r.holder_module} (thread "
            f"{r.holder_thread}) was profiled (ALREADY_EXISTS: Another profiling "
            f"session active); {count}"
            + (f", {len(pairs)} pairs of modules" if len(pairs) > 1 else "")
            + f". Fix: {THREADS_FIX}",
            "not profiled: another thread's profiling session held the profiler",
            THREADS_FIX,
            failed,
        )
    starts = [t for t in script_traces if t.call == "start"]
    if errors:
        active = _script_trace_active(script_traces, errors)
    else:
        active = starts[0] if starts else None
    if active is not None:
        where = f" at {active.site}" if active.site else ""
        return Collision(
            "script",
            f"the workload runs its own profiler (jax.profiler.start_trace{where}) while auto "
            "PGLE profiles; auto PGLE's profiling session collides with it (ALREADY_EXISTS: "
            "Another profiling session active), so its executions were not profiled"
            + (f" ({count})" if count else "")
            + f". Fix: {SCRIPT_FIX}",
            "not profiled: the workload's own profiler held the profiling session",
            SCRIPT_FIX,
            failed,
        )
    return Collision(
        "other",
        "auto PGLE could not start its profiling session: another session held the profiler "
        "(ALREADY_EXISTS: Another profiling session active), not one pgle saw start (a profiler "
        "server, a library's own trace)" + (f"; {count}" if count else ""),
        "not profiled: another profiling session held the profiler",
        "find what else starts the JAX profiler in the workload and keep it off while auto PGLE "
        "profiles",
        failed,
    )


def _script_trace_active(
    script_traces: Sequence[ScriptTrace], errors: Sequence[PgleSessionError]
) -> ScriptTrace | None:
    """The workload's own trace that was running when a session failed, if any."""
    for e in errors:
        open_: ScriptTrace | None = None
        for r in script_traces:
            if r.t > e.t:
                break
            open_ = r if r.call == "start" else None
        if open_ is not None:
            return open_
    return None


def auto_rows(
    facts: jax_log.RunFacts,
    runs: int,
    platform: str | None,
    known_pgle_keys: AbstractSet[str] = frozenset(),
    collision: Collision | None = None,
) -> list[AutoRow]:
    """One verdict per module: optimized / not_optimized / empty_profile, with reason and fix."""
    out = []
    for name in sorted(facts.modules):
        m = facts.modules[name]
        row = AutoRow(
            module=name,
            status=STATUS_NOT_OPTIMIZED,
            profiled_executions=m.profiled if facts.observed else None,
            runs=m.runs or runs,
            empty_profiles=m.empty_profiles if facts.observed else None,
            profile_bytes=max(m.fdo_lengths) if m.fdo_lengths else None,
        )
        cached_pgle = [k for k in m.hits if k in known_pgle_keys]
        if m.fdo_lengths:
            row.status = STATUS_OPTIMIZED
            row.reason = (
                f"recompiled with a {max(m.fdo_lengths)}-byte profile after "
                f"{row.runs} profiled executions"
            )
        elif cached_pgle:
            row.status = STATUS_OPTIMIZED
            row.reason = "loaded its PGLE-optimized executable from the compilation cache"
            row.from_cache = True
        elif facts.observed and m.profiled >= row.runs and m.empty_profiles >= m.profiled:
            row.status = STATUS_EMPTY_PROFILE
            row.reason = (
                f"{all_of(m.profiled, 'profiled execution')} gave an empty profile: "
                + empty_profile_cause(platform)
            )
            row.fix = "run on an NVIDIA GPU with no other CUPTI client attached"
        elif facts.observed and m.profiled >= row.runs:
            row.reason = (
                f"profiled {times(m.profiled)} but never executed again: auto PGLE "
                f"recompiles on execution {row.runs + 1}"
            )
            row.fix = "run more steps, or lower --runs"
        elif facts.observed and m.profiled > 0:
            row.reason = (
                f"executed {times(m.profiled)}; auto PGLE "
                f"needs {row.runs + 1} ({row.runs} profiled, then the recompile)"
            )
            row.fix = "run more steps, or lower --runs"
        elif facts.observed:
            row.reason = (
                "never profiled: compiled ahead of time (`.lower().compile()`), or not executed"
            )
        else:
            row.reason = "no recompilation with a profile was logged"
        hit = (
            collision is not None
            and row.status != STATUS_OPTIMIZED
            and (name in collision.modules if collision.modules else True)
        )
        if hit and collision is not None:
            # The whole cause is one reason of the report; each row names it briefly.
            row.reason, row.fix, row.collision = collision.row, collision.fix, collision.kind
        out.append(row)
    return out


def auto_status(modules: list[dict[str, Any]]) -> str:
    statuses = {m["status"] for m in modules}
    if STATUS_OPTIMIZED in statuses:
        return STATUS_OPTIMIZED
    if STATUS_EMPTY_PROFILE in statuses:
        return STATUS_EMPTY_PROFILE
    return STATUS_NOT_OPTIMIZED


# -- prewarm --------------------------------------------------------------------------
def prewarm_modules(
    facts: jax_log.RunFacts,
    runs: int,
    platform: str | None,
    on_disk: set[str],
    known_pgle_keys: AbstractSet[str],
    writer: bool = True,
) -> list[dict[str, Any]]:
    """Per module: did a PGLE-optimized entry land on disk (`on_disk`: the cache's keys)? With
    the reason and fix if not.

    `writer`: this is process 0 (or the only process). JAX writes cache entries from process 0
    only, so on the other processes of a job a module counts as optimized when it was
    recompiled with a non-empty profile; its entry is process 0's to write."""
    base = {r.module: r for r in auto_rows(facts, runs, platform, known_pgle_keys)}
    out = []
    for name in sorted(facts.modules):
        m = facts.modules[name]
        used = m.keys()  # every cache key the module used (a list: ModuleFacts is no dict)
        pgle_keys = [k for k in m.pgle_keys] + [
            k for k in used if k in known_pgle_keys and k not in m.pgle_keys
        ]
        row = PrewarmRow(
            **base[name].__dict__,
            first_pass_keys=[k for k in used if k not in pgle_keys],
            pgle_optimized_keys=pgle_keys,
            executions_seen=(
                (m.profiled + (1 if m.fdo_lengths else 0)) if facts.observed else None
            ),
        )
        present = [k for k in pgle_keys if k in on_disk]
        if not writer:
            if row.status == STATUS_EMPTY_PROFILE:
                row.status = STATUS_NOT_OPTIMIZED
            if row.status == STATUS_OPTIMIZED:
                row.reason = (
                    f"{row.reason}; process 0 writes its cache entry (JAX "
                    "writes from process 0 only)"
                )
        elif present:
            row.status = STATUS_OPTIMIZED
            row.reason = (
                "PGLE-optimized entry written"
                if any(k in m.writes for k in present)
                else "PGLE-optimized entry already in the cache"
            )
            row.fix = None
        else:
            row.status = STATUS_NOT_OPTIMIZED
            if pgle_keys:  # recompiled with a profile, but nothing on disk
                why = (
                    "; ".join(dict.fromkeys(m.not_written)) or "the entry is not on disk (evicted?)"
                )
                row.reason = f"recompiled with a profile but JAX did not keep it: {why}"
                row.fix = (
                    "host callbacks (jax.debug.print, pure_callback) keep JAX from caching a module"
                    if "host callbacks" in why
                    else "unset JAX_COMPILATION_CACHE_MAX_SIZE"
                )
            elif m.not_written and not m.writes:
                row.reason = f"JAX did not write it: {m.not_written[0]}"
        out.append(row.to_dict())
    return out


def prewarm_status(modules: list[dict[str, Any]]) -> str:
    status = auto_status(modules) if modules else STATUS_NOT_OPTIMIZED
    return STATUS_NOT_OPTIMIZED if status == STATUS_EMPTY_PROFILE else status


# -- nsys -----------------------------------------------------------------------------
def nsys_modules(facts: jax_log.RunFacts, manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per module: loaded its PGLE-optimized executable, fell back to the first-pass one, or was
    compiled anew; `manifest`: the cache's pgle-manifest.json (what prewarm saw)."""
    prewarmed = manifest.get("modules", {})
    out = []
    for name in sorted(facts.modules):
        m = facts.modules[name]
        if not (m.pgle_loaded or m.pgle_miss or m.expect_writes or m.misses):
            continue  # a module only seen writing or hitting outside the PGLE path
        before = prewarmed.get(name)
        row = NsysRow(
            module=name,
            prewarm_status=(before or {}).get("status"),
            prewarm_executions=(before or {}).get("executions_seen"),
        )
        if m.pgle_loaded:
            row.status, row.reason = STATUS_LOADED, "loaded its PGLE-optimized executable"
        elif m.pgle_miss:
            row.status = STATUS_FELL_BACK
            plain = set((before or {}).get("plain_keys", []))
            if before and plain & set(m.hits) and not before.get("first_pass_keys"):
                row.reason = (
                    "prewarm never ran it; an earlier EXPECT_PGLE run (e.g. `pgle nsys`) "
                    "compiled and cached it without PGLE; loaded that"
                )
                row.fix = "run the same code path (and shapes) during prewarm"
            elif before and before.get("status") == STATUS_OPTIMIZED:
                row.reason = (
                    "prewarm wrote its PGLE-optimized entry, but it is gone (pruned or "
                    "evicted) or its key changed; loaded the first-pass executable"
                )
                row.fix = "prewarm again; keep JAX_COMPILATION_CACHE_MAX_SIZE unset"
            elif before and all_profiles_empty(before):
                # Every profile prewarm took was empty: more executions would not have helped,
                # so that is the cause to fix; a module that also ran too few times says so.
                seen = before.get("executions_seen")
                few = (
                    f"prewarm executed it {times(seen)}, fewer than runs+1, and "
                    if before.get("status") != STATUS_EMPTY_PROFILE and seen is not None
                    else ""
                )
                row.reason = (
                    f"loaded the first-pass executable: {few}"
                    f"{all_of(before['profiled_executions'], 'execution')} prewarm profiled "
                    "gave an empty profile, so JAX never "
                    "recompiled it with one: "
                    + empty_profile_cause((manifest.get("environment") or {}).get("platform"))
                )
                row.fix = "prewarm on an NVIDIA GPU with no other CUPTI client attached"
            else:
                seen = (before or {}).get("executions_seen")
                row.reason = (
                    "loaded the first-pass executable: prewarm executed it "
                    + (times(seen) if seen is not None else "too few times")
                    + ", fewer than runs+1"
                )
                row.fix = "run more steps in prewarm, or lower --runs"
        else:
            row.status = STATUS_COMPILED_ANEW
            recorded = {
                k
                for role in ("first_pass_keys", "pgle_optimized_keys", "plain_keys")
                for k in (before or {}).get(role, [])
            }
            row.reason = (
                # The key prewarm wrote missed: its entry left the cache, the key is the same.
                "prewarm's cache entry for it is gone (pruned or evicted); compiled anew"
                if recorded & set(m.misses)
                else "prewarm compiled it with a different key (shapes, flags or code changed)"
                if before
                else "prewarm never compiled it"
            )
            row.fix = "run the same code path (and shapes) during prewarm"
        out.append(row.to_dict())
    return out


def all_profiles_empty(prewarmed: Mapping[str, Any]) -> bool:
    """Prewarm's manifest entry says every profiled execution gave an empty profile."""
    profiled, empty = prewarmed.get("profiled_executions"), prewarmed.get("empty_profiles")
    return bool(profiled) and empty is not None and empty >= profiled


def nsys_status(modules: list[dict[str, Any]]) -> str:
    loaded = sum(1 for m in modules if m["status"] == STATUS_LOADED)
    if modules and loaded == len(modules):
        return STATUS_LOADED
    return Applied.PARTIAL if loaded else STATUS_FELL_BACK


# -- --require / --require-all, and the exit code -----------------------------------------
def required_failures(
    modules: list[dict[str, Any]], *, ok: str, require_all: bool, require: tuple[str, ...]
) -> list[str]:
    """Sentences for every required module that is not `ok` (or absent)."""
    failures = []
    if require_all:
        failures += [f"{m['module']} is {m['status']}" for m in modules if m["status"] != ok]
    for pattern in require:
        matched = [m for m in modules if fnmatch.fnmatchcase(m["module"], pattern)]
        if not matched:
            failures.append(f"no module matches --require {pattern}")
        failures += [
            f"{m['module']} is {m['status']}"
            for m in matched
            if m["status"] != ok and f"{m['module']} is {m['status']}" not in failures
        ]
    return failures


def finish_code(
    report: Report,
    workload_code: int,
    ok: str,
    require_all: bool,
    require: tuple[str, ...],
    exit_phrase: str | None = None,
) -> int:
    """The workload's own failure first (`exit_phrase`: how to say it,
    pgle.evidence.events.workload_exit_phrase); then --require-all / --require."""
    if workload_code != 0:
        report.summary.append(exit_phrase or f"the workload exited with code {workload_code}")
        return workload_code
    failures = required_failures(report.modules, ok=ok, require_all=require_all, require=require)
    if failures:
        report.reasons += failures
        report.summary.append("not verified: " + "; ".join(failures))
        return EXIT_NOT_VERIFIED
    return 0
