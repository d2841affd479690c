"""Every rank-dependent path of one workflow run, resolved once.

A workflow says what it needs (a `LayoutRequest`: its run folder, log, input paths that may
hold placeholders, collect's output); `resolve` fills them in for this process in one pure
call over pgle.jobs.ranks, and refuses outputs that every rank would write to the same file.
The workflow body then works with plain paths from the `RankLayout` and never asks which
rank it is. In one process the layout is the same paths with %r = 0 and no job folder.

`OutputPlan` is collect's: where this rank's profile goes, and where rank 0 merges the ranks'
(README "Running on a cluster"):

- `-o` with a rank placeholder (`profiles/rank%r.pb`): every rank writes its own profile;
  rank 0's job report lists them (mode `per_rank`).
- `-o` without one (`profile.pb`): every rank writes `<job_dir>/profiles/rank-<r>.pb` (or a
  directory `rank-<r>/` with --per-module) and rank 0 merges them into `-o` (mode `merge`).
- `--rank N`: rank N alone runs the profiler and writes `-o` (mode `one_rank`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

from pgle.errors import BadInput
from pgle.jobs import ranks
from pgle.jobs.ranks import RankInfo
from pgle.launch.stall import REPORT_AFTER_S, StallPolicy

DEFAULT_GATHER_TIMEOUT_S = 600.0
PROFILE_EXTENSIONS = (".pb", ".pbtxt")
GATHER_MODES = ("folder", "kv")


def parse_stall_timeout(value: float | str | StallPolicy | None) -> float | StallPolicy | None:
    """`--stall-timeout`: a duration (`90s`, `30m`, `2h`, or seconds: stop after that long
    without progress), `off` (0), `report:DURATION` (report after that long, never stop) or
    `auto` (None: the default policy, pgle.launch.stall)."""
    if value is None or isinstance(value, StallPolicy):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise BadInput(f"--stall-timeout {value:g} is negative.")
        return float(value)
    text = str(value).strip().lower()
    if text in ("auto", ""):
        return None
    if text in ("off", "0", "none", "no"):
        return 0.0
    mode, colon, after = text.partition(":")
    if mode.strip() == "report":
        seconds = _duration(after.strip(), value) if colon else REPORT_AFTER_S
        if seconds <= 0:
            raise BadInput(f"--stall-timeout {value!r}: report after a duration above 0.")
        return StallPolicy(None, seconds, rhythm_stop=False)
    return _duration(text, value)


def _duration(text: str, value: object) -> float:
    try:
        seconds = float(text)
    except ValueError:
        from pgle.units import parse_duration

        return parse_duration(text, "--stall-timeout")
    if not 0 <= seconds < float("inf"):
        raise BadInput(f"--stall-timeout {value!r}: a duration >= 0, e.g. 30m.")
    return seconds


@dataclasses.dataclass(frozen=True)
class JobOptions:
    """How the driver runs a workflow's launches, checked on construction: the multi-process
    options (`--job-dir`, `--gather-timeout`, `--gather`) and the stall watchdog's bound
    (`--stall-timeout`: seconds, "off", or None for the bound derived from the run)."""

    job_dir: str | None = None
    gather_timeout: float | None = None  # None: DEFAULT_GATHER_TIMEOUT_S
    gather: str = "folder"  # folder (a shared job folder) | kv (jax.distributed's store)
    stall_timeout: float | str | None = None
    require_same_program: bool = False  # issue 36: ranks compiling different programs stop

    def __post_init__(self) -> None:
        if self.gather_timeout is not None and self.gather_timeout < 0:
            raise BadInput(f"--gather-timeout {self.gather_timeout:g} is negative.")
        if self.job_dir is not None:
            ranks.validate_template(self.job_dir)
        if self.gather not in GATHER_MODES:
            raise BadInput(f"--gather {self.gather!r}: use one of {', '.join(GATHER_MODES)}.")
        if self.gather == "kv" and self.job_dir is not None and "://" in str(self.job_dir):
            raise BadInput(
                "--gather kv keeps each rank's job folder local: drop the URL "
                "--job-dir, or drop --gather kv."
            )
        object.__setattr__(self, "stall_timeout", parse_stall_timeout(self.stall_timeout))

    @property
    def stall_timeout_s(self) -> float | StallPolicy | None:
        """The stall watchdog's policy: seconds (stop after), 0 for off, a StallPolicy
        (`report:`), None for the default."""
        return self.stall_timeout  # type: ignore[return-value]

    @property
    def gather_timeout_s(self) -> float:
        return (
            DEFAULT_GATHER_TIMEOUT_S if self.gather_timeout is None else float(self.gather_timeout)
        )


@dataclasses.dataclass(frozen=True)
class OutputRequest:
    """collect's `-o` and the options that decide where the ranks' profiles go."""

    output: str | None
    per_module: bool = False
    only_rank: int | None = None  # --rank N
    default: str | None = None  # one process, no -o: here (None: inside the run folder)


@dataclasses.dataclass(frozen=True)
class LayoutRequest:
    run_dir: str | None = None  # --run-dir (per rank in a job: must hold %r)
    run_root: str | None = None  # the run folder when --run-dir is not given (tune's phases)
    log: str | None = None  # --log (per rank in a job: must hold %r)
    # placeholders filled
    inputs: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    output: OutputRequest | None = None
    selected_ranks: tuple[int, ...] | None = None  # nsys --ranks (None: every rank)


@dataclasses.dataclass(frozen=True)
class OutputPlan:
    mode: str  # one_rank | merge | per_rank
    profiled: bool  # this process runs the profiler
    rank_output: str | None  # where this process writes its profile (None: its run folder)
    merged_output: str | None  # mode merge: rank 0 merges the ranks' profiles into this
    only_rank: int | None  # --rank N
    merges_here: bool = False  # this process (rank 0) writes `merged_output`


@dataclasses.dataclass(frozen=True)
class RankLayout:
    info: RankInfo
    job_dir: Path | None  # None: one process
    run_dir: str | None  # this process's run folder (None: .pgle/runs/<stamp>-<command>-<pid>)
    log: str | None
    inputs: Mapping[str, str | None]
    output: OutputPlan | None
    selected: bool = True  # this process is one of --ranks
    n_selected: int = 1  # how many processes are

    @property
    def writes_shared(self) -> bool:
        """This process writes what the whole job shares (a cache manifest): the only process,
        or rank 0 (JAX itself writes cache entries from process 0 only)."""
        return self.info.is_leader

    @property
    def rank(self) -> int:
        return self.info.rank

    def input(self, name: str) -> str:
        """Input `name`, placeholders filled, for a command that requires it."""
        value = self.inputs.get(name)
        if value is None:
            raise BadInput(f"{name} is required but was not given.")
        return value

    @property
    def plan(self) -> OutputPlan:
        """The output plan of a command that writes a profile (collect)."""
        if self.output is None:
            raise RuntimeError("this command's layout has no output plan")
        return self.output

    @property
    def world_size(self) -> int:
        return self.info.world_size


def job_dir(info: RankInfo, job: JobOptions) -> Path | None:
    from pgle.jobs import folder

    return folder.job_dir_for(info, explicit=job.job_dir) if info.is_multiprocess else None


def resolve(request: LayoutRequest, info: RankInfo, job_dir: Path | None) -> RankLayout:
    """Every path of `request` for this process (BadInput on an unknown placeholder, a per-rank
    output without %r in a job, or a --rank outside the job)."""
    multi = job_dir is not None
    if request.run_dir:
        run_dir = _per_rank(request.run_dir, "--run-dir", info, multi)
    elif request.run_root is not None:
        run_dir = request.run_root
    else:
        run_dir = str(job_dir / f"rank-{info.rank}") if job_dir is not None else None
    selected, n_selected = True, info.world_size if multi else 1
    if request.selected_ranks is not None:
        if max(request.selected_ranks) >= info.world_size:
            raise BadInput(
                f"--ranks {','.join(map(str, request.selected_ranks))}: this job has "
                f"ranks 0 to {info.world_size - 1} only."
            )
        selected = info.rank in request.selected_ranks
        n_selected = len(request.selected_ranks) if multi else 1
    return RankLayout(
        info=info,
        job_dir=job_dir,
        run_dir=run_dir,
        log=_per_rank(request.log, "--log", info, multi),
        inputs={k: _expand(v, info) for k, v in request.inputs.items()},
        output=_output_plan(request.output, info, job_dir) if request.output else None,
        selected=selected,
        n_selected=n_selected,
    )


def _expand(template: str | None, info: RankInfo) -> str | None:
    return None if template is None else ranks.expand_path(os.fspath(template), info)


def _per_rank(template: str | None, option: str, info: RankInfo, multi: bool) -> str | None:
    """An output every rank writes: in a multi-process job it must hold %r or {rank}."""
    if template is None:
        return None
    expanded = _expand(template, info)
    if multi and not ranks.has_rank_placeholder(os.fspath(template)):
        raise BadInput(
            f"{option} {template} has no rank placeholder: all {info.world_size} ranks "
            "would write the same path.",
            hint=f"Add %r (the rank), e.g. {_suggest(os.fspath(template))}.",
        )
    return expanded


def _suggest(template: str) -> str:
    stem, dot, ext = template.rpartition(".")
    if dot and "/" not in ext and stem:
        return f"{stem}-%r.{ext}"
    return template.rstrip("/") + "-%r"


def _output_plan(req: OutputRequest, info: RankInfo, job_dir: Path | None) -> OutputPlan:
    only = req.only_rank
    if only is not None and not 0 <= only < info.world_size:
        raise BadInput(
            f"--rank {only} is not a rank of this job (ranks 0 to {info.world_size - 1})."
        )
    expanded = _expand(req.output, info)
    if job_dir is None:
        return OutputPlan(
            "one_rank" if only is not None else "per_rank",
            True,
            expanded if req.output is not None else req.default,
            None,
            only,
        )
    if only is not None:
        is_mine = info.rank == only
        return OutputPlan("one_rank", is_mine, expanded if is_mine else None, None, only)
    if req.output is not None and ranks.has_rank_placeholder(req.output):
        return OutputPlan("per_rank", True, expanded, None, None)
    if req.per_module:
        mine = job_dir / "profiles" / f"rank-{info.rank}"
        merged = expanded or str(job_dir / "profiles" / "merged")
    else:
        suffix = os.path.splitext(expanded)[1] if expanded else ".pb"
        if suffix not in PROFILE_EXTENSIONS:
            from pgle.profiles.files import profile_format

            profile_format(f"x{suffix}")  # a wrong extension: the clear error, now
        mine = job_dir / "profiles" / f"rank-{info.rank}{suffix}"
        merged = expanded or str(job_dir / f"profile{suffix}")
    return OutputPlan("merge", True, str(mine), merged, None, merges_here=info.is_leader)
