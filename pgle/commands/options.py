"""The parts every workflow's options are composed of, each checked when it is built.

They are frozen: a workflow never changes the options it was given, and a bad value
(`--min-coverage 2`, `--steps 4`, `--stat p101`) is refused with exit 2 when the options are
built, before anything is launched (README "Exit codes": 2 means nothing ran).
Multi-process options (`--job-dir`, `--gather-timeout`) are pgle.jobs.layout.JobOptions: they
go to the driver, never to a workflow.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from pgle.errors import BadInput
from pgle.evidence.schema import WindowSpec
from pgle.launch.trace_options import DETAILS, PGLE
from pgle.launch.workload import Workload

CONVERTERS = ("jaxlib", "pgle")
FORMATS = ("binary", "text")
# --per-module's files: text (<fingerprint>.pbtxt) unless --format binary: XLA looks up
# <fp>.pbtxt before <fp>.pb (docs/xla-facts.md, section 3).
PER_MODULE_FORMAT = "text"
DEFAULT_STAT = "median"
# The default window on a script without step markers (README "Choosing the window"): skip the
# first executions (compile, warm-up), profile a few, never longer than this.
AUTO_WARMUP = 2
AUTO_EXECUTIONS = 5
AUTO_MAX_SECONDS = 30.0
# --trace-max-bytes' default: under protobuf's 2 GiB, past which the profiler writes the XSpace
# as an empty file while reporting success (tsl WriteBinaryProto; sglang-jax #1511), with room
# for steps bigger than the one the window's size was predicted from.
DEFAULT_TRACE_MAX_BYTES = 3 << 29  # 1.5 GiB


def parse_steps(text: str) -> tuple[int, int]:
    """'10:5' -> (10, 5): profile 5 steps starting at step 10 (0-based)."""
    start, sep, count = text.partition(":")
    try:
        s, c = int(start), int(count)
    except ValueError:
        raise BadInput(f"--steps {text!r} is not START:COUNT (e.g. 10:5).") from None
    if not sep or s < 0 or c < 1:
        raise BadInput(f"--steps {text!r} is not START:COUNT with START >= 0 and COUNT >= 1.")
    return s, c


@dataclasses.dataclass(frozen=True)
class Window:
    """Which part of the run collect profiles (`--steps`, `--delay/--duration`, `--step-name`),
    and what its trace holds (`--trace-detail`, `--trace-max-bytes`: 0 for no bound)."""

    steps: tuple[int, int] | None = None  # (start, count)
    step_name: str | None = None
    delay: float | None = None
    duration: float | None = None
    detail: str = PGLE
    max_bytes: int = DEFAULT_TRACE_MAX_BYTES

    def __post_init__(self):
        if self.detail not in DETAILS:
            raise BadInput(f"--trace-detail {self.detail!r}: use one of {', '.join(DETAILS)}.")
        if self.max_bytes < 0:
            raise BadInput(f"--trace-max-bytes {self.max_bytes}: use a size >= 0 (0: no bound).")
        if self.steps is not None:
            start, count = self.steps
            if start < 0 or count < 1:
                raise BadInput(
                    f"--steps {start}:{count} is not START:COUNT with START >= 0 and COUNT >= 1."
                )
            if self.delay is not None or self.duration is not None:
                raise BadInput(
                    "--steps and --delay/--duration exclude each other: pick one window."
                )
        if (self.delay or 0) < 0 or (self.duration is not None and self.duration <= 0):
            raise BadInput("--delay must be >= 0 and --duration > 0 seconds.")

    @property
    def mode(self) -> str:
        if self.steps:
            return "steps"
        return "time" if self.delay is not None or self.duration is not None else "auto"

    def spec(self, trace_dir: Path) -> WindowSpec:
        """What the harness gets. Default: steps 2..6 if the script marks steps, else the
        whole run."""
        common: dict[str, Any] = {
            "step_name": self.step_name,
            "detail": self.detail,
            "max_bytes": self.max_bytes,
        }
        if self.steps:
            start, count = self.steps
            return WindowSpec("steps", str(trace_dir), start=start, count=count, **common)
        if self.mode == "time":
            return WindowSpec(
                "time", str(trace_dir), delay=self.delay or 0.0, duration=self.duration, **common
            )
        return WindowSpec(
            "auto",
            str(trace_dir),
            warmup=AUTO_WARMUP,
            executions=AUTO_EXECUTIONS,
            max_seconds=AUTO_MAX_SECONDS,
            **common,
        )

    def describe(self) -> str:
        """The window in words, said before the run starts."""
        if self.steps:
            start, count = self.steps
            return f"steps {start}..{start + count - 1}" + (
                f" of {self.step_name!r}" if self.step_name else ""
            )
        if self.mode == "time":
            return (
                f"{self.duration:g} s" if self.duration else "to the end"
            ) + f" from {self.delay or 0:g} s after the start"
        marked = f"steps named {self.step_name!r}" if self.step_name else "steps"
        return (
            f"{marked} 2..6 if the script marks them (jax.profiler.StepTraceAnnotation), "
            f"else executions {AUTO_WARMUP}..{AUTO_WARMUP + AUTO_EXECUTIONS - 1} of its "
            f"step function (the jitted function that takes the most host time); at most "
            f"{AUTO_MAX_SECONDS:g} s, the rest of the run unprofiled"
        )

    def short(self) -> str:
        """The window in a few words, for a line after collect has explained it in full."""
        if self.steps or self.mode == "time":
            return self.describe()
        marked = f"steps named {self.step_name!r}" if self.step_name else "steps"
        return f"collect's window ({marked} 2..6, or executions 2..6 of the step function)"


@dataclasses.dataclass(frozen=True)
class Extraction:
    """How collect turns the trace into a profile (`--per-module`, `--stat`, `--format`,
    `--converter`, `--qualify`), checked together."""

    per_module: bool = False  # a directory of <fingerprint>.pbtxt|.pb files (pgle's converter)
    stat: str | None = None  # pgle's converter: median (default) | mean | min | max | pNN
    fmt: str | None = None  # per-module file format: PER_MODULE_FORMAT (default) | the other
    converter: str | None = None  # single file: jaxlib (default) | pgle
    qualify: bool = False  # pgle's single-file converter: <fingerprint>::name for every entry
    keep_trace: bool = True  # False: delete pgle's trace once the profile is written

    def __post_init__(self):
        if self.converter is not None and self.converter not in CONVERTERS:
            raise BadInput(f"unknown converter '{self.converter}': use jaxlib or pgle.")
        if self.per_module and self.converter == "jaxlib":
            raise BadInput(
                "--per-module needs pgle's converter: jaxlib's pools every module into one file.",
                hint="Drop --converter jaxlib.",
            )
        if self.stat is not None:
            if not self.uses_pgle_converter:
                raise BadInput(
                    "--stat applies to pgle's converter: jaxlib's always takes the mean.",
                    hint="Add --per-module or --converter pgle.",
                )
            from pgle.profiles.convert import parse_stat

            parse_stat(self.stat)
        if self.qualify and self.per_module:
            raise BadInput(
                "--qualify is for a single file: a per-module directory already "
                "keeps each module apart."
            )
        if self.qualify and self.converter != "pgle":
            raise BadInput("--qualify needs pgle's converter.", hint="Add --converter pgle.")
        if self.fmt is not None:
            if self.fmt not in FORMATS:
                raise BadInput(f"unknown format '{self.fmt}': use binary or text.")
            if not self.per_module:
                raise BadInput(
                    "--format applies to --per-module directories: a single "
                    "profile's format follows its extension (.pb binary, .pbtxt "
                    "text)."
                )

    @property
    def uses_pgle_converter(self) -> bool:
        return self.per_module or self.converter == "pgle"

    @property
    def needs_fingerprints(self) -> bool:
        """The run must log XLA's `Fingerprint before LHS` lines."""
        return self.per_module or (self.converter == "pgle" and self.qualify)


@dataclasses.dataclass(frozen=True)
class VerdictOptions:
    """When a module counts as applied, and whether anything less fails the command
    (`--require-applied`: the whole verdict; `--require MODULE`: those modules)."""

    # None: not given; 0.9 decides, except where XLA prices unprofiled compute with its
    # speed-of-light model (pgle.verdicts.collectives). Given: it always decides.
    min_coverage: float | None = None
    require_applied: bool = False
    require: tuple[str, ...] = ()  # module name globs that must be applied (exit 3 otherwise)

    def __post_init__(self):
        if any(not p or not p.strip() for p in self.require):
            raise BadInput("--require needs a module name or glob (e.g. 'jit_train_step*').")
        if self.min_coverage is not None and not 0.0 <= self.min_coverage <= 1.0:
            raise BadInput(f"--min-coverage {self.min_coverage:g} is not between 0 and 1.")


@dataclasses.dataclass(frozen=True)
class AutoPgleOptions:
    """JAX's auto PGLE (`--runs`, `--percentile`) and what must come of it (`--require-all`,
    `--require`)."""

    runs: int = 3
    percentile: int = 90
    require_all: bool = False
    require: tuple[str, ...] = ()  # module name globs that must be optimized

    def __post_init__(self):
        # Values JAX would silently turn into no PGLE at all.
        if self.runs < 1:
            raise BadInput(
                f"--runs {self.runs}: auto PGLE needs at least 1 profiled execution "
                "(0 turns it off)."
            )
        if not 0 <= self.percentile <= 100:
            raise BadInput(
                f"--percentile {self.percentile} is outside 0..100; jaxlib would "
                "return an empty profile and nothing would be optimized."
            )


@dataclasses.dataclass(frozen=True)
class StoreOptions:
    """`--store DIR|gs://...` and `--store-policy`: the profile store a workflow adds to
    (collect) or serves from (run), checked before anything is launched. `serve`: the store
    must exist (a run reads it); a collect creates it."""

    path: str
    policy: str = "replace"
    serve: bool = False

    def __post_init__(self):
        from pgle.store.policy import parse_policy
        from pgle.store.store import is_remote

        parse_policy(self.policy)  # BadInput on an unknown policy
        if not self.path or not str(self.path).strip():
            raise BadInput("--store needs a folder or a gs:// path.")
        if is_remote(self.path):
            if not str(self.path).startswith("gs://") or len(str(self.path)) <= len("gs://"):
                raise BadInput(f"--store {self.path}: remote stores are gs://bucket/path.")
            return
        p = Path(self.path)
        if p.exists() and not p.is_dir():
            raise BadInput(f"--store {self.path} exists and is not a directory.")
        if not p.exists():
            if self.serve:
                raise BadInput(
                    f"--store {self.path} does not exist.",
                    hint="`pgle collect --store` (or `pgle store add`) creates it.",
                )
            parent = p.absolute().parent
            while not parent.exists():
                parent = parent.parent
            if not os.access(parent, os.W_OK):
                raise BadInput(f"--store {self.path} cannot be created: {parent} is not writable.")
        elif not os.access(p, os.W_OK) and not self.serve:
            raise BadInput(f"--store {self.path} is not writable.")


DEFAULT_PERCENTILE = 90  # of the merge of the ranks' profiles, as JAX auto PGLE aggregates


@dataclasses.dataclass(frozen=True)
class CollectOptions:
    workload: Workload
    output: str | None  # None: inside the run folder (or `default_output`)
    window: Window = Window()
    extraction: Extraction = Extraction()
    force: bool = False
    allow_empty: bool = False
    run_dir: str | None = None
    log: str | None = None
    # Multi-process jobs (pgle/commands/collect_job.py): profile one rank only, and the
    # percentile of rank 0's merge of the ranks' profiles.
    rank: int | None = None
    merge_percentile: int = DEFAULT_PERCENTILE
    default_output: str | None = None  # one process without -o: here (tune: its run folder)
    store: StoreOptions | None = None  # --store: add each module's profile to it

    def __post_init__(self):
        if not 0 <= self.merge_percentile <= 100:
            raise BadInput(f"merge percentile {self.merge_percentile} is outside 0..100.")
        if self.store is not None and not self.extraction.per_module:
            raise BadInput(
                "--store keeps per-module profiles (keyed by fingerprint): add --per-module."
            )

    @property
    def per_module(self) -> bool:
        return self.extraction.per_module
