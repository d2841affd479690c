"""Which process of a multi-process job this is, and per-rank output paths.

pgle runs as the per-rank wrapper under the cluster's own launcher (`srun`,
`mpirun`, a Kubernetes JobSet); every rank runs its own pgle. `detect` reads
the launcher's environment variables, `expand_path` turns `profiles/rank%r.pb`
into `profiles/rank3.pb`. Pure functions over a mapping: no jax import, no
files, so the CLI can call them before anything else.

Sources, first match wins (the order matters where launchers nest):

1. pgle's own `PGLE_RANK` / `PGLE_WORLD_SIZE` (+ `PGLE_LOCAL_RANK`,
   `PGLE_JOB_ID`): for any launcher pgle does not know. With
   `PGLE_WORLD_SIZE` set and `PGLE_RANK` unset, a Kubernetes indexed Job's
   `JOB_COMPLETION_INDEX` is the rank (the same index jax uses as process id;
   nothing in a pod's environment says the Job's size, hence PGLE_WORLD_SIZE).
2. Open MPI (`OMPI_COMM_WORLD_RANK`, `_LOCAL_RANK`, `_SIZE`). Before SLURM:
   `mpirun` inside a SLURM allocation starts its daemons with one srun task
   per node, so the SLURM_* variables then describe the daemons, not the ranks.
3. A SLURM job step (`SLURM_PROCID`, `SLURM_LOCALID`, `SLURM_NTASKS`,
   `SLURM_NODEID`, `SLURM_JOB_ID`, `SLURM_STEP_ID`). Only inside a step: an
   sbatch script itself also has `SLURM_PROCID=0` and `SLURM_NTASKS=N`, and a
   pgle started there directly is one process, not rank 0 of N (jax's own
   SLURM detection likewise needs `SLURM_STEP_NODELIST`, a step variable).
4. PMI launchers (MPICH/Hydra, Intel MPI: `PMI_RANK`, `PMI_SIZE`,
   `MPI_LOCALRANKID`).
5. Otherwise one process: rank 0 of 1.

jax 0.10.2 itself reads no process-id or process-count variable: its
`jax.distributed.initialize()` takes them from the cluster detectors (SLURM,
Open MPI, Kubernetes, TPU) or from arguments, and from the environment only
`JAX_COORDINATOR_ADDRESS` (plus `JAX_COORDINATOR_PORT`,
`JAX_COORDINATOR_BIND_ADDRESS`, `JAX_LOCAL_DEVICE_IDS`). So `JAX_PROCESS_ID`
/ `JAX_NUM_PROCESSES` are deliberately not read: a user setting them would
believe jax honours them. The coordinator address is kept for reports.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from typing import Any

from pgle.errors import BadInput


@dataclasses.dataclass(frozen=True)
class RankInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    node_id: int | None = None
    job_id: str | None = None
    step_id: str | None = None
    # Which launcher the numbers came from: "pgle", "kubernetes", "ompi",
    # "slurm", "pmi" or "single".
    source: str = "single"
    coordinator_address: str | None = None

    @property
    def is_multiprocess(self) -> bool:
        return self.world_size > 1

    @property
    def is_leader(self) -> bool:
        """Rank 0 writes job-level outputs (merged profile, job report)."""
        return self.rank == 0

    @property
    def job_key(self) -> str | None:
        """`<job>.<step>` (or `<job>`): names this launch, the same on every rank."""
        if self.job_id is None:
            return None
        return f"{self.job_id}.{self.step_id}" if self.step_id is not None else self.job_id

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _first(env: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    """(name, value) of the first of `names` set to a non-empty value."""
    for name in names:
        value = env.get(name)
        if value is not None and value.strip() != "":
            return name, value.strip()
    return None


def _int(env: Mapping[str, str], *names: str, minimum: int = 0) -> int | None:
    found = _first(env, *names)
    if found is None:
        return None
    name, value = found
    try:
        number = int(value)
    except ValueError:
        raise BadInput(f"environment variable {name}={value!r} is not a whole number.") from None
    if number < minimum:
        raise BadInput(f"environment variable {name}={value} must be at least {minimum}.")
    return number


def _set_int(env: Mapping[str, str], *names: str, minimum: int = 0) -> int:
    """`_int` of a variable the caller saw set."""
    number = _int(env, *names, minimum=minimum)
    if number is None:
        raise BadInput(f"environment variable {names[0]} is not set.")
    return number


def _check(info: RankInfo, rank_var: str, size_var: str) -> RankInfo:
    if not 0 <= info.rank < info.world_size:
        raise BadInput(
            f"rank {info.rank} (from {rank_var}) is not below the world size "
            f"{info.world_size} (from {size_var})."
        )
    return info


def _ompi_job_id(env: Mapping[str, str]) -> str | None:
    # Open MPI 5 / PRRTE: a namespace like "prterun-host-1234@1"; Open MPI 4:
    # the job id leads OMPI_MCA_orte_hnp_uri ("1531576320.0;tcp://...").
    found = _first(env, "PMIX_NAMESPACE")
    if found:
        return found[1]
    uri = _first(env, "OMPI_MCA_orte_hnp_uri")
    if uri:
        head = uri[1].split(";", 1)[0].split(".", 1)[0]
        return head or None
    return None


def detect(environ: Mapping[str, str]) -> RankInfo:
    """The RankInfo of the process whose environment is `environ` (pass os.environ).

    Raises BadInput (one sentence naming the variable) when a launcher's
    variables are present but malformed or inconsistent.
    """
    env = environ
    coordinator = (_first(env, "JAX_COORDINATOR_ADDRESS") or (None, None))[1]
    # The scheduler's job and step ids name the launch whatever launched the
    # ranks (mpirun inside an allocation included).
    slurm_job = (_first(env, "SLURM_JOB_ID", "SLURM_JOBID") or (None, None))[1]
    slurm_step = (_first(env, "SLURM_STEP_ID", "SLURM_STEPID") or (None, None))[1]

    if _first(env, "PGLE_WORLD_SIZE"):
        size = _set_int(env, "PGLE_WORLD_SIZE", minimum=1)
        rank_vars = ("PGLE_RANK", "JOB_COMPLETION_INDEX")
        found = _first(env, *rank_vars)
        if found is None:
            raise BadInput(
                "PGLE_WORLD_SIZE is set but PGLE_RANK is not.",
                hint="Set PGLE_RANK to this process's rank (0 to PGLE_WORLD_SIZE-1).",
            )
        rank = _set_int(env, found[0])
        explicit_job = (_first(env, "PGLE_JOB_ID") or (None, None))[1]
        info = RankInfo(
            rank=rank,
            local_rank=_int(env, "PGLE_LOCAL_RANK") or 0,
            world_size=size,
            job_id=explicit_job or slurm_job,
            step_id=None if explicit_job else slurm_step,
            source="pgle" if found[0] == "PGLE_RANK" else "kubernetes",
            coordinator_address=coordinator,
        )
        return _check(info, found[0], "PGLE_WORLD_SIZE")
    if _first(env, "PGLE_RANK"):
        raise BadInput(
            "PGLE_RANK is set but PGLE_WORLD_SIZE is not.",
            hint="Set PGLE_WORLD_SIZE to the number of processes in the job.",
        )

    if _first(env, "OMPI_COMM_WORLD_RANK") and _first(env, "OMPI_COMM_WORLD_SIZE"):
        info = RankInfo(
            rank=_set_int(env, "OMPI_COMM_WORLD_RANK"),
            local_rank=_int(env, "OMPI_COMM_WORLD_LOCAL_RANK") or 0,
            world_size=_set_int(env, "OMPI_COMM_WORLD_SIZE", minimum=1),
            job_id=slurm_job or _ompi_job_id(env),
            step_id=slurm_step if slurm_job else None,
            source="ompi",
            coordinator_address=coordinator,
        )
        return _check(info, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")

    if (
        slurm_step is not None
        and _first(env, "SLURM_PROCID")
        and _first(env, "SLURM_NTASKS", "SLURM_NPROCS")
    ):
        info = RankInfo(
            rank=_set_int(env, "SLURM_PROCID"),
            local_rank=_int(env, "SLURM_LOCALID") or 0,
            world_size=_set_int(env, "SLURM_NTASKS", "SLURM_NPROCS", minimum=1),
            node_id=_int(env, "SLURM_NODEID"),
            job_id=slurm_job,
            step_id=slurm_step,
            source="slurm",
            coordinator_address=coordinator,
        )
        return _check(info, "SLURM_PROCID", "SLURM_NTASKS")

    if _first(env, "PMI_RANK") and _first(env, "PMI_SIZE"):
        info = RankInfo(
            rank=_set_int(env, "PMI_RANK"),
            local_rank=_int(env, "MPI_LOCALRANKID", "PMI_LOCAL_RANK") or 0,
            world_size=_set_int(env, "PMI_SIZE", minimum=1),
            job_id=slurm_job,
            step_id=slurm_step if slurm_job else None,
            source="pmi",
            coordinator_address=coordinator,
        )
        return _check(info, "PMI_RANK", "PMI_SIZE")

    # One process. Keep the SLURM job id (an sbatch script, an salloc shell):
    # it still names the job in reports.
    return RankInfo(job_id=slurm_job, step_id=slurm_step, coordinator_address=coordinator)


# --- placeholders in output paths -------------------------------------------

PERCENT_PLACEHOLDERS = {"r": "rank", "l": "local_rank", "n": "world_size", "j": "job_id"}
BRACE_PLACEHOLDERS = ("rank", "local_rank", "world_size", "job_id")

# One token at a time: %x, %% (or a lone % at the end), {{, }}, {name}, a lone
# brace, or a run of ordinary characters.
_TOKEN = re.compile(r"%.?|\{\{|\}\}|\{[^{}]*\}|[{}]|[^%{}]+", re.DOTALL)

_HELP = (
    "Placeholders: %r or {rank}, %l or {local_rank}, %n or {world_size}, %j or {job_id}; "
    "%% for %, {{ and }} for braces."
)


def _placeholders(template: str) -> list[tuple[str, str | None]]:
    """[(token, field-or-None)] for `template`; BadInput on an unknown placeholder."""
    out: list[tuple[str, str | None]] = []
    for match in _TOKEN.finditer(template):
        token = match.group(0)
        if token.startswith("%"):
            if token == "%%":
                out.append(("%", None))
                continue
            key = token[1:]
            if not key:
                raise BadInput(f"output path {template!r} ends in a lone %.", hint=_HELP)
            if key not in PERCENT_PLACEHOLDERS:
                raise BadInput(
                    f"unknown placeholder {token} in output path {template!r}.", hint=_HELP
                )
            out.append((token, PERCENT_PLACEHOLDERS[key]))
        elif token in ("{{", "}}"):
            out.append((token[0], None))
        elif token.startswith("{") and len(token) > 1:
            name = token[1:-1]
            if name not in BRACE_PLACEHOLDERS:
                raise BadInput(
                    f"unknown placeholder {token} in output path {template!r}.", hint=_HELP
                )
            out.append((token, name))
        elif token in ("{", "}"):
            raise BadInput(f"unmatched {token!r} in output path {template!r}.", hint=_HELP)
        else:
            out.append((token, None))
    return out


def expand_path(template: str, info: RankInfo) -> str:
    """`template` with its placeholders filled from `info` (a string; works for gs:// too).

    `%r`/`{rank}`, `%l`/`{local_rank}`, `%n`/`{world_size}`, `%j`/`{job_id}`;
    `%%`, `{{`, `}}` for literal characters. Any other placeholder, or `%j`
    when no job id is known, is BadInput.
    """
    parts = []
    for token, field in _placeholders(template):
        if field is None:
            parts.append(token)
            continue
        value = getattr(info, field)
        if value is None:
            raise BadInput(
                f"output path {template!r} uses {token} but no job id is known "
                "(not inside a SLURM job, and PGLE_JOB_ID is not set).",
                hint="Set PGLE_JOB_ID, or leave the job id out of the path.",
            )
        parts.append(str(value))
    return "".join(parts)


def fields_in(template: str) -> set[str]:
    """The RankInfo fields `template` uses ("rank", "job_id", ...); BadInput on an unknown
    placeholder."""
    return {field for _, field in _placeholders(template) if field is not None}


def has_rank_placeholder(template: str) -> bool:
    """True if `template` holds %r or {rank}, so that every rank gets its own path.

    A multi-process job whose ranks all write one path would clobber it;
    callers check this before launching. %l alone is not enough: local ranks
    repeat on every node, and the folder is usually shared.
    """
    return "rank" in fields_in(template)


def validate_template(template: str) -> None:
    """BadInput now, before anything is launched, if `template` has an unknown placeholder."""
    _placeholders(template)


def literal(path: os.PathLike[str] | str) -> str:
    """`path` with %, { and } escaped, so that placeholder expansion gives it back unchanged."""
    return os.fspath(path).replace("%", "%%").replace("{", "{{").replace("}", "}}")
