"""What `pgle tune` measures: its arms, their step times, and how they compare.

An arm is one way to compile the same program: `default` (the user's own flags, untouched),
`o1` (JAX_OPTIMIZATION_LEVEL=O1), `sol` (XLA's speed-of-light latency estimator,
--xla_gpu_enable_analytical_sol_latency_estimator=true), `pgle` (the profile tune collected),
and sums of these (`o1+pgle`). Every arm runs the same harness with the user's flags and
differs from `default` only in what its name says: the command-buffer and profiler changes
of the profiling run stay in tune's collect phase (`collect_changes`). Plain `tune` is the
arms `default` (folders `baseline*`) and `pgle` (folders `run*`); `tune --compare` names its
own (folders `arm-<name>*`).

Step times come from each run folder's events (pgle.evidence.jit_steps: markers, else the
executions of the step function), with profiled steps left out; the ratio of an arm against
`default` pools the arm's runs, with a seeded bootstrap interval. `pgle report` reads the same
numbers (tune.json), so terminal, JSON and HTML agree.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pgle.errors import BadInput
from pgle.evidence.events import read_events
from pgle.evidence.jit_steps import RunSteps, run_steps
from pgle.evidence.steps import summarize
from pgle.phrases import plural
from pgle.xla import flag_table, versions

GPU_PLATFORMS = ("gpu", "cuda", "rocm")
MIN_STEPS = 5  # per side: fewer step times give no ratio worth printing
PARTS = ("o1", "sol", "pgle")
DEFAULT = "default"
# JAX's `jax_optimization_level` config (jax/_src/config.py, an enum of UNKNOWN/O0..O3),
# read from JAX_OPTIMIZATION_LEVEL when jax is imported; checked in jax 0.6.2 to 0.10.2.
O1_VARIABLE = ("JAX_OPTIMIZATION_LEVEL", "O1")
O1_SINCE = (0, 6, 2)
SOL_FLAG = "xla_gpu_enable_analytical_sol_latency_estimator"
TUNE_JSON = "tune.json"


@dataclasses.dataclass(frozen=True)
class Arm:
    name: str  # "default", "o1", "pgle", "o1+pgle", ...
    o1: bool = False
    sol: bool = False
    pgle: bool = False

    @property
    def variables(self) -> dict[str, str]:
        return dict([O1_VARIABLE]) if self.o1 else {}

    @property
    def xla(self) -> dict[str, str | None]:
        return {SOL_FLAG: "true"} if self.sol else {}

    def describe(self) -> str:
        parts = []
        if self.o1:
            parts.append("=".join(O1_VARIABLE))
        if self.sol:
            parts.append(f"--{SOL_FLAG}=true")
        if self.pgle:
            parts.append("the collected profile")
        return " + ".join(parts) if parts else "your flags, unchanged"

    def folder(self, plain: bool, i: int) -> str:
        """The run folder of the arm's i-th run inside the tune folder."""
        base = (
            ("baseline" if self.name == DEFAULT else "run")
            if plain
            else "arm-" + self.name.replace("+", "-")
        )
        return base if i == 0 else f"{base}-{i + 1}"


PLAIN = (Arm(DEFAULT), Arm("pgle", pgle=True))


def parse_arms(text: str, jax: tuple[int, ...] | None = None) -> tuple[Arm, ...]:
    """`default,o1,pgle,o1+pgle` -> the arms, `default` first (added when missing: every
    ratio is against it). Refused (exit 2) before anything runs: an unknown or repeated arm,
    or `o1` on a jax without JAX_OPTIMIZATION_LEVEL."""
    arms: list[Arm] = []
    for word in (w.strip().lower() for w in text.split(",")):
        if not word:
            continue
        if word == DEFAULT:
            arm = Arm(DEFAULT)
        else:
            parts = word.split("+")
            if any(p not in PARTS for p in parts) or len(set(parts)) != len(parts):
                raise BadInput(
                    f"--compare: unknown arm {word!r}: use default, o1, sol, pgle or "
                    "sums of them (o1+pgle)."
                )
            name = "+".join(p for p in PARTS if p in parts)  # one spelling per arm
            arm = Arm(name, o1="o1" in parts, sol="sol" in parts, pgle="pgle" in parts)
        if any(a.name == arm.name for a in arms):
            raise BadInput(f"--compare: arm {arm.name!r} is listed twice.")
        arms.append(arm)
    if not arms:
        raise BadInput("--compare needs arms, e.g. default,o1,pgle,o1+pgle.")
    if any(a.o1 for a in arms) and jax is not None and jax < O1_SINCE:
        raise BadInput(
            f"--compare o1: jax {versions.version_string(jax)} has no "
            "JAX_OPTIMIZATION_LEVEL (pgle checked it from jax 0.6.2)."
        )
    if not any(a.name == DEFAULT for a in arms):
        arms.insert(0, Arm(DEFAULT))
    else:
        arms.sort(key=lambda a: a.name != DEFAULT)
    return tuple(arms)


def collect_changes(profiling_flags: dict[str, str | None]) -> list[str]:
    """What tune's collect phase ran differently from the user's own runs (and the arms)."""
    out = ["the JAX profiler ran for the window (profiled steps are never timed)"]
    if flag_table.COMMAND_BUFFER in profiling_flags:
        out.append(
            f"--{flag_table.COMMAND_BUFFER}='' (command buffers off: kernels inside "
            "CUDA graphs are invisible to the profiler)"
        )
    return out


# -- step times ----------------------------------------------------------------------------
def folder_steps(folder: Path | str) -> RunSteps | None:
    """The steps of one run folder, or None when it has no events file."""
    path = os.path.join(folder, "events.jsonl")
    if not os.path.exists(path):
        return None
    return run_steps(read_events(path))


def pooled(folders: Iterable[Path | str]) -> tuple[list[float], RunSteps | None]:
    """Step times of several runs of one arm, and the first run's steps (how found)."""
    times: list[float] = []
    first = None
    for f in folders:
        steps = folder_steps(f)
        if steps is None:
            continue
        first = first or steps
        times += steps.times
    return times, first


def ratio(before: Sequence[float], after: Sequence[float]) -> tuple[dict | None, str | None]:
    """(ratio with its interval, None) or (None, why not) for two pooled samples."""
    from pgle.analysis.throughput import ratio_interval

    if len(before) < MIN_STEPS or len(after) < MIN_STEPS:
        return None, (
            f"no step-time ratio: {len(before)} and "
            f"{plural(len(after), 'step time')}, fewer than {MIN_STEPS} each; "
            "run more steps or --repeat more"
        )
    return ratio_interval(list(before), list(after)), None


def compare_step_times(
    collect_dir: Path | str,
    baseline_dirs: Sequence[Path | str],
    run_dirs: Sequence[Path | str],
    *,
    platform: str | None,
    applied: bool,
) -> dict[str, Any]:
    """Plain tune: the median and spread of each phase, and the ratio of the runs with the
    profile over the baseline runs. collect's own steps are shown (profiled steps left out)
    but never compared: its run had the profiler on and command buffers off. No ratio on a
    backend without profiles, where no module applied the profile, or from too few steps
    (`caveat` says which)."""
    collect, csteps = pooled([collect_dir])
    before, bsteps = pooled(baseline_dirs)
    after, asteps = pooled(run_dirs)
    steps = asteps or bsteps or csteps
    out: dict[str, Any] = {
        "collect": summarize(collect),
        "baseline": summarize(before),
        "run": summarize(after),
        "runs": {"baseline": len(baseline_dirs), "run": len(run_dirs)},
        "steps": steps.to_dict() if steps else None,
        "ratio": None,
        "interval": None,
        "caveat": None,
    }
    gpu = platform is not None and platform.lower() in GPU_PLATFORMS
    # What the runs' label says: "with the profile" only where some module used it (on CPU
    # XLA ignores a profile: those runs ran the baseline's program)
    out["profile_applied"] = bool(gpu and applied and baseline_dirs)
    if not collect and not after and not before:
        out["caveat"] = "no step times: " + (
            steps.how
            if steps
            else "the workload marks no steps and no jitted function executed at least 3 times"
        )
    elif not gpu:
        out["caveat"] = (
            f"no step-time ratio: backend {platform} applies no profile, so every "
            "phase ran the same program (and collect's ran with the profiler on)"
        )
    elif not baseline_dirs:
        out["caveat"] = "no step-time ratio: there was no profile to run with"
    elif not applied:
        out["caveat"] = (
            "no step-time ratio: no module applied the profile, so both sides ran the same schedule"
        )
    else:
        out["interval"], out["caveat"] = ratio(before, after)
        out["ratio"] = out["interval"]["ratio"] if out["interval"] else None
    return out


def _ms(summary: dict | None) -> str:
    return f"{summary['median_s'] * 1e3:.2f} ms" if summary else "-"


def step_time_lines(times: dict[str, Any], *, profiled: bool) -> list[str]:
    """tune's terminal lines for plain tune (the same numbers as its JSON and HTML)."""
    lines = []
    steps = times.get("steps") or {}
    if steps.get("source") == "executions":
        lines.append(f"steps: {steps['how']}")
    if times.get("ratio") is not None:
        ci = times["interval"]
        noise = "beyond run-to-run noise" if ci["beyond_noise"] else "within run-to-run noise"
        return lines + [
            (
                f"median step: {_ms(times['baseline'])} without the profile, {_ms(times['run'])} "
                f"with it (ratio {ci['ratio']:.3f}, {ci['confidence']:.0%} interval "
                f"{ci['low']:.3f}..{ci['high']:.3f}, {noise}; "
                f"{plural(times['runs']['run'], 'run')} each)"
            )
        ]
    if times.get("run") or times.get("collect") or times.get("baseline"):
        parts = [f"{_ms(times.get('collect'))} (collect, profiled steps left out)"]
        if times.get("baseline"):
            parts.append(f"{_ms(times['baseline'])} (baseline)")
        if profiled and times.get("profile_applied", True):
            label = "with the profile"
        elif profiled:
            label = "run; no module applied the profile"
        else:
            label = "run"
        parts.append(f"{_ms(times.get('run'))} ({label})")
        lines.append("median step: " + ", ".join(parts))
    if times.get("caveat"):
        lines.append(times["caveat"])
    return lines
