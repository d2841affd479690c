"""Async collectives XLA makes synchronous after scheduling: missing from a profile, and
rightly so.

After the latency-hiding scheduler, XLA:GPU's `gpu-convert-async-collectives-to-sync` pass
(pipeline `async-to-sync-converter`; every jax 0.4.35-0.12.0.1) makes each async collective
pair with nothing scheduled between its start and done synchronous. Up to jax 0.11.0 it marks
the pair `is_sync` and keeps its names: the executed module still runs `all-reduce-start`, a
trace shows it, a profile can hold it. From jax 0.11.1 it replaces the pair with a new
synchronous instruction (`all-reduce-start`/`-done` -> `all-reduce.6`, whose metadata keeps
`scheduling_name="all-reduce-start"`): the executed module, every trace of it and every
profile made from one (jaxlib's converter and pgle's key a cost by the executed name) hold
`all-reduce.6`, while the scheduler asks the profile for `all-reduce-start`. The accuracy
checker then lists `all-reduce-start` as missing on every run, however the profile was
collected. Seen with the real XLA:GPU compiler (docs/xla-facts.md, "Async collectives made
synchronous").

So, per async collective start the checker lists as missing (pgle.verdicts.collectives
decides what follows):
- converted: the executed module does not run it under that name: its HLO (kept by `pgle
  run`) has the synchronous instruction whose `scheduling_name` is that start, or no
  instruction of that name at all; or the log says XLA made the pair synchronous (`Added pair:
  {start, done`, VLOG 3 of convert_async_collectives_to_sync) and the jax renames such pairs.
  No profile can hold it: not counted.
- missing: the executed module runs it under that name: its HLO has it, or the jax keeps the
  names, or the log shows XLA's pass looking at it (`Found async start %start`) and keeping
  it async (no `Added pair`). A profile of the run holds it; this one lacks it.
- unresolved: only a log, which cannot show whether XLA converted it (a jax that renames, or
  an unknown jax, without the pass's VLOG lines).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from pgle.phrases import listed, plural
from pgle.xla import hlo_text
from pgle.xla.instruction_kinds import (
    COMPUTE,
    OTHER,
    Kind,
    bare,
    classify,
    classify_module,
    is_async_collective_start,
)

if TYPE_CHECKING:  # the events module costs start-up: verify reads no events
    from pgle.evidence.event_kinds import ModuleCompiled

# jax 0.11.0 keeps the names of a pair it makes synchronous; 0.11.1, 0.11.2 and 0.12.0.1
# replace the pair with a new synchronous instruction (the real compiler, deviceless H100).
RENAMED_SINCE = (0, 11, 1)
LAST_KEEPING_NAMES = (0, 11, 0)
VMODULE = "gpu_hlo_schedule=1,convert_async_collectives_to_sync=3"

_SCHEDULING_NAME = re.compile(r'\bscheduling_name="([^"]+)"')


def renames(jax: tuple[int, ...] | None) -> bool | None:
    """Whether this jax renames a pair it makes synchronous (None: unknown jax)."""
    if jax is None:
        return None
    return jax >= RENAMED_SINCE


@dataclasses.dataclass(frozen=True)
class Executed:
    """What one module ran, from its executed (optimized, scheduled) HLO text."""

    names: frozenset[str]
    # scheduling_name -> the executed instruction's name, where the two differ: the names
    # the scheduler knew that the module runs under another name (jax >= 0.11.1).
    renamed: Mapping[str, str]
    fingerprint: str | None = None
    # Each instruction's kind, told by the HLO (pgle.xla.instruction_kinds.classify_module): what
    # an async wrapper the log names without its kind (`fusion-start`) really is.
    kinds: Mapping[str, Kind] = dataclasses.field(default_factory=dict)


def executed_of(text: str) -> Executed:
    """The instruction names of every computation, and the renamed ones, of an HLO text as
    `compiled.as_text()` (or XLA's `*after_optimizations.txt` dump) prints it."""
    module = hlo_text.parse(text)
    names: set[str] = set()
    renamed: dict[str, str] = {}
    for comp in module.computations.values():
        for ins in comp.instructions:
            names.add(ins.name)
            s = _SCHEDULING_NAME.search(ins.attrs)
            if s and s.group(1) != ins.name:
                renamed.setdefault(s.group(1), ins.name)
    fp = module.fingerprint if module.fingerprint and len(module.fingerprint) == 32 else None
    return Executed(frozenset(names), renamed, fp, classify_module(module))


class ExecutedModules:
    """The executed HLO of the modules a run kept, found by fingerprint (what the log gives a
    module with VLOG on) or, without one, by a module name compiled once."""

    def __init__(self, modules: Iterable[Executed | tuple[str, Executed]] = ()) -> None:
        self._by_fp: dict[str, Executed] = {}
        self._by_name: dict[str, list[Executed]] = {}
        for item in modules:
            name, ex = item if isinstance(item, tuple) else (None, item)
            if ex.fingerprint:
                self._by_fp[ex.fingerprint] = ex
            if name:
                self._by_name.setdefault(name, []).append(ex)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_name.values()) or len(self._by_fp)

    def find(self, module: str | None, fingerprint: str | None) -> Executed | None:
        if fingerprint and self._by_fp:
            # Another compile of the same name (other shapes, another rank) is another module.
            return self._by_fp.get(fingerprint)
        same = self._by_name.get(module or "") or []
        return same[0] if len(same) == 1 else None


def load_executed(modules: Iterable[ModuleCompiled]) -> ExecutedModules:
    """From the harness's `module_compiled` events: each kept `hlo_file` (pgle's own run
    folder). Unreadable files are skipped: those modules fall back to the log."""
    found: list[tuple[str, Executed]] = []
    for m in modules:
        path = m.hlo_file
        if not (m.module and path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                found.append((m.module, executed_of(f.read())))
        except (OSError, ValueError):
            continue
    return ExecutedModules(found)


@dataclasses.dataclass
class Split:
    """The missing collectives / host copies of one module, by what the evidence shows."""

    missing: list[str] = dataclasses.field(default_factory=list)
    # (the name the scheduler asked for, the executed instruction's name or None)
    converted: list[tuple[str, str | None]] = dataclasses.field(default_factory=list)
    unresolved: list[str] = dataclasses.field(default_factory=list)
    by: str | None = None  # what showed the conversion: "hlo" | "log"
    # Why the unresolved ones are: "no_lines" (no `Added pair` line for them) or
    # "version" (XLA made them synchronous, the jax that wrote the log is unknown).
    why_unresolved: str | None = None
    # Async wrappers whose kind neither the name nor an executed HLO tells (`fusion-start`,
    # `custom-call-start` from a log alone): never compute (pgle.xla.instruction_kinds).
    unknown: list[str] = dataclasses.field(default_factory=list)
    # name -> what the executed HLO says it is (`all-reduce`), where the name did not.
    labels: dict[str, str] = dataclasses.field(default_factory=dict)


def split(
    missing_communication: Iterable[str],
    *,
    executed: Executed | None = None,
    seen: Iterable[str] = (),
    added_pairs: Iterable[str] = (),
    renamed: bool | None = None,
) -> Split:
    """Sort a module's missing collectives (see the module's doc). `executed`: its executed
    HLO, where the run kept it (exact); `seen` / `added_pairs`: the async starts its log says
    XLA's pass looked at / made synchronous (VLOG 3); `renamed`: whether the jax that
    compiled it renames such pairs (None: unknown)."""
    out = Split()
    looked = {bare(p) for p in seen}
    pairs = {bare(p) for p in added_pairs}
    for name in missing_communication:
        b = bare(name)
        if classify(b).category == OTHER:
            told = executed.kinds.get(b) if executed is not None else None
            if told is None or told.category == OTHER:
                out.unknown.append(name)
            elif told.category != COMPUTE:  # e.g. a Triton collective fusion
                out.missing.append(name)
                out.labels[name] = f"{told.label()}, read from the executed HLO"
            continue  # an async compute fusion: compute
        if not is_async_collective_start(b):
            out.missing.append(name)  # a synchronous collective or a host copy: it runs so
        elif executed is not None:
            if b in executed.renamed:
                out.converted.append((name, executed.renamed[b]))
                out.by = "hlo"
            elif b not in executed.names:
                out.converted.append((name, None))
                out.by = "hlo"
            else:
                out.missing.append(name)
        elif renamed is False:
            out.missing.append(name)  # kept its name, even if made synchronous
        elif b in pairs:
            if renamed:
                out.converted.append((name, None))
                out.by = out.by or "log"
            else:
                out.unresolved.append(name)
                out.why_unresolved = "version"
        elif b in looked:
            out.missing.append(name)  # XLA's pass looked at it and kept it async
        else:
            out.unresolved.append(name)
            out.why_unresolved = out.why_unresolved or "no_lines"
    return out


def converted_note(s: Split) -> str | None:
    if not s.converted:
        return None
    if s.by == "hlo":
        shown = listed(
            [
                f"{n} ran as the synchronous {e}" if e else f"{n} is not in the executed module"
                for n, e in s.converted
            ]
        )
        how = "read from the executed HLO"
    else:
        shown = listed([n for n, _ in s.converted])
        how = (
            "the log's `Added pair` lines: XLA made them synchronous after scheduling, and "
            "jax >= 0.11.1 renames such a pair"
        )
    return (
        f"{plural(len(s.converted), 'async collective')} the scheduler asked for "
        f"{'is' if len(s.converted) == 1 else 'are'} in no profile "
        f"and cannot be: {shown} ({how}). Nothing was scheduled to overlap them, so "
        "XLA turned them into new synchronous instructions after scheduling (jax >= "
        "0.11.1); a trace of the module, and any profile made from one, names those. Not "
        "counted, and collecting again would not change it."
    )


def unknown_note(s: Split) -> str | None:
    if not s.unknown:
        return None
    return (
        f"{listed(s.unknown)}: async instructions not in the profile whose kind the log does not "
        "show, so pgle never counts them as compute: on jax >= 0.11 a small all-reduce compiles "
        "to an async Triton collective fusion (fusion-start/-done), and async custom calls "
        "(custom-call-start) carry communication (TransformerEngine-JAX's expert-parallel "
        "dispatch/combine, collective GEMMs). To tell: run the workload under `pgle run` (it "
        "reads the executed HLO: the fusion's backend kind, the custom call's target), or "
        "dump the HLO (--xla_dump_to) and look for the fusion_backend_config kind "
        '"__triton_collective" or the custom call\'s custom_call_target.'
    )


def unresolved_note(s: Split) -> str | None:
    if not s.unresolved:
        return None
    names = listed(s.unresolved)
    if s.why_unresolved == "version":
        return (
            f"{names}: not in the profile; the log says XLA made it synchronous after "
            "scheduling (`Added pair`), and whether that renamed it (so that no profile "
            "can hold it) depends on the jax version (jax >= 0.11.1 renames, <= 0.11.0 "
            "keeps the name), which the log does not show: pass --jax."
        )
    return (
        f"{names}: not in the profile. Either the profile lacks a collective the module "
        "runs (the scheduler guessed its cost), or XLA made it synchronous after "
        "scheduling, which jax >= 0.11.1 does to an async collective nothing overlaps, "
        "renaming it (all-reduce-start -> all-reduce.N) so that no profile can hold it. "
        "This log cannot tell which. To tell: run the workload under `pgle run` (it reads "
        f"the executed HLO), or rerun it with TF_CPP_VMODULE={VMODULE} and verify that "
        "log (XLA then logs `Added pair: {<start>, <done>` for each pair it makes "
        "synchronous)."
    )
