"""`pgle estimate SCRIPT|RUN_FOLDER`: what PGLE would buy, from XLA:GPU's own compiler, without
a GPU (docs/guide/will-pgle-help.md).

1. capture: the workload runs under pgle's harness on CPU with N emulated devices
   (`--xla_force_host_platform_device_count`); the harness exports, for CUDA, each jitted
   function that reaches the step rule's minimum of executions (pgle.launch.step_export), and
   the step rule picks the step among them, as collect does (pgle.launch.step_rule);
2. one deviceless compile per arm (`default`: the user's flags; `pgle`: with a profile, the
   given one or one derived from the costs; `o1`; `sol`) in a child process with
   `TF_CPP_VMODULE=latency_hiding_scheduler=1` (pgle.estimate.compile_child), whose log gives
   XLA's own statistics (pgle.estimate.xla_stats);
3. every arm's schedule replayed with the same costs by pgle's simulator (pgle.estimate.replay),
   and the prediction (pgle.estimate.prediction).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pgle.commands.arms import O1_SINCE, O1_VARIABLE, SOL_FLAG
from pgle.errors import BadInput, PgleError
from pgle.estimate import compile_child, costs, prediction, targets, xla_stats
from pgle.evidence.event_kinds import JitFunctions
from pgle.evidence.events import read_run_events
from pgle.launch import childenv, step_export
from pgle.launch.execution import execute
from pgle.launch.runfolder import RunFolder
from pgle.launch.workload import Workload
from pgle.report import Report
from pgle.xla import hlo_text, versions

ARMS = ("default", "pgle", "o1", "sol")
CHILD = Path(compile_child.__file__)
COMPILE_TIMEOUT_S = 900.0
AUTOTUNE_OFF = "--xla_gpu_autotune_level=0"
PROFILE_FLAG = "--xla_gpu_pgle_profile_file_or_directory_path"
PLUGIN_HINT = "pip install 'pgle[estimate]'"


@dataclasses.dataclass(frozen=True)
class EstimateOptions:
    source: str  # a script, or a run folder
    args: tuple[str, ...] = ()
    module: str | None = None
    target: str | None = None
    devices: int | None = None
    arms: tuple[str, ...] = ("default", "pgle")
    profile: str | None = None
    what_if: tuple[str, ...] = ()
    run_dir: str | None = None
    # `tune --compare --predict`: the workload tune runs, and the device kind its collect saw
    # (the target when --target is not given), instead of `source`.
    workload: Workload | None = None
    device_kind: str | None = None


def parse_arms(text: str) -> tuple[str, ...]:
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    bad = [w for w in words if w not in ARMS]
    if bad:
        raise BadInput(f"--arms: unknown arm {bad[0]!r}: use {', '.join(ARMS)}.")
    out = ["default"] + [w for w in dict.fromkeys(words) if w != "default"]
    return tuple(out)


def plugin_missing() -> str | None:
    """Why XLA:GPU's compiler is not installed here, or None."""
    if importlib.util.find_spec("jax_plugins") is None or not any(
        importlib.util.find_spec(f"jax_plugins.xla_cuda{v}") for v in ("12", "13")
    ):
        return (
            f"pgle estimate needs the CUDA compiler plugin of your jax: {PLUGIN_HINT} "
            "(jax-cuda12-plugin and jax-cuda12-pjrt of your jax's version; no GPU needed)."
        )
    return None


def _run_folder_source(folder: Path) -> tuple[Workload, int | None, str | None]:
    spec = folder / "spec.json"
    try:
        data = json.loads(spec.read_text())
        work = data["workload"]
    except (OSError, ValueError, KeyError, TypeError):
        raise BadInput(f"{folder} is not a pgle run folder (no readable spec.json).") from None
    if work.get("command") or not (work.get("script") or work.get("module")):
        raise BadInput(f"run folder {folder}: estimate reruns Python scripts only.")
    events = (
        read_run_events(folder / "events.jsonl") if (folder / "events.jsonl").is_file() else None
    )
    backend = events.backend if events else None
    return (
        Workload(work.get("script"), work.get("module"), tuple(work.get("args") or ())),
        backend.device_count if backend else None,
        backend.device_kind if backend else None,
    )


def estimate(opts: EstimateOptions) -> Report:
    missing = plugin_missing()
    if missing:
        raise PgleError(missing)
    rules = [costs.parse_what_if(w) for w in opts.what_if]
    source = Path(opts.source)
    kind = opts.device_kind
    devices = opts.devices
    if opts.workload is not None:
        workload = opts.workload
    elif source.is_dir():
        workload, seen_devices, kind = _run_folder_source(source)
        devices = devices or seen_devices
    else:
        workload = Workload.from_cli(opts.module, (opts.source, *opts.args))
    devices = devices or 8
    if devices < 1:
        raise BadInput(f"--devices {devices} must be at least 1.")
    target = targets.load(opts.target or targets.for_device_kind(kind) or targets.DEFAULT)
    if opts.profile and not os.path.isfile(opts.profile):
        raise BadInput(f"--profile {opts.profile} does not exist or is not a file.")
    jax_version = versions.jax_version()
    if "o1" in opts.arms and jax_version is not None and jax_version < O1_SINCE:
        raise BadInput("--arms o1: this jax has no JAX_OPTIMIZATION_LEVEL (jax >= 0.6.2).")

    run = RunFolder.create("estimate", opts.run_dir)
    export_dir = run.path / "export"
    child = childenv.build(
        None,
        xla={"xla_force_host_platform_device_count": str(devices)},
        variables={"JAX_PLATFORMS": "cpu"},
    )
    ex = execute(workload, run, child, export_dir=str(export_dir))
    if ex.exit_code != 0:
        raise PgleError(
            f"the workload exited with {ex.exit_code} on {devices} emulated CPU devices; "
            f"see {run.log}.",
        )
    exported, step = _pick_step(ex.events.records, export_dir)
    work = run.path / "estimate"
    work.mkdir(exist_ok=True)
    warnings = list(child.warnings)
    arms: dict[str, dict[str, Any]] = {}
    extra: list[str] = []
    default = _compile(exported, target, devices, "default", {}, [], work, extra)
    arms["default"] = default
    base = default["module_hlo"]
    cost_table = costs.derive(base, target, devices)
    if opts.profile:
        cost_table.update(costs.from_profile(opts.profile))
    instructions = [i for c in base.computations.values() for i in c.instructions]
    cost_table = costs.apply_what_if(cost_table, instructions, rules)
    profile_path = work / "pgle-profile.pbtxt"
    profile_path.write_bytes(costs.profile_text(cost_table))
    for arm in opts.arms[1:]:
        flags = [f"{PROFILE_FLAG}={profile_path}"] if arm == "pgle" else []
        env: dict[str, str] = {}
        if arm == "sol":
            flags.append(f"--{SOL_FLAG}=true")
        if arm == "o1":
            env = dict([O1_VARIABLE])
        arms[arm] = _compile(exported, target, devices, arm, env, flags, work, extra)
    for compiled in arms.values():
        compiled["costs"] = {**costs.derive(compiled["module_hlo"], target, devices), **cost_table}
    pred = prediction.predict(arms, cost_table)
    rows = [prediction.arm_row(name, arm) for name, arm in arms.items()]
    details: dict[str, Any] = {
        "step_module": step,
        "target": target.name,
        "devices": devices,
        "arms": rows,
        "prediction": pred,
        "profile": str(profile_path),
        "profile_origin": opts.profile or "derived from the module and the target",
        "what_if": [r.text for r in rules],
    }
    warnings += extra
    summary = prediction.summary_lines(step, target.name, devices, rows, pred)
    return Report(
        command="estimate",
        status="cannot help" if pred["cannot_help"] else "predicted",
        run_dir=str(run.path),
        log_path=str(run.log),
        details=details,
        warnings=warnings,
        summary=summary,
        reasons=[pred["why"]] if pred.get("why") else [],
    )


def _pick_step(records: list[Any], export_dir: Path) -> tuple[Path, str]:
    index = export_dir / step_export.INDEX
    entries: list[dict[str, Any]] = []
    try:
        lines = index.read_text().splitlines() if index.is_file() and not index.is_symlink() else []
    except OSError:
        lines = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    jit = next((r for r in reversed(records) if isinstance(r, JitFunctions)), None)
    step = jit.step if jit else None
    if jit is None or step is None:
        raise PgleError(
            "found no step function: no jitted function ran at least "
            "3 times (the step rule of collect); run a few steps."
        )
    entry = next((e for e in entries if e.get("function") == step), None)
    if entry is None or "file" not in entry:
        why = entry.get("error") if entry else "it was not exported"
        raise PgleError(f"could not export the step function {step} for CUDA: {why}.")
    name = str(entry["file"])
    if "/" in name or name.startswith("."):
        raise PgleError(f"bad export index entry {name!r} in {index}.")
    module = next(
        (f.get("module") for f in (jit.functions or []) if f.get("function") == step), None
    )
    return export_dir / name, str(module or step)


def _compile(
    exported: Path,
    target: targets.Target,
    devices: int,
    arm: str,
    env_extra: dict[str, str],
    flags: list[str],
    work: Path,
    notes: list[str],
) -> dict[str, Any]:
    hlo_out = work / f"{arm}.hlo.txt"
    log_path = work / f"{arm}.log"
    config = work / f"{target.name}.txtpb"
    if not config.exists():
        config.write_text(target.text)
    user = os.environ.get("XLA_FLAGS", "")
    autotune = ""
    for _ in range(2):
        env = {
            **os.environ,
            **env_extra,
            "JAX_PLATFORMS": "cpu",  # the CUDA plugin registers without a driver (jax 0.10.2)
            "JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1",  # jax 0.6/0.7 check even with cpu
            "TF_CPP_MIN_LOG_LEVEL": "0",
            "TF_CPP_VMODULE": "latency_hiding_scheduler=1,gpu_hlo_schedule=1",
            "XLA_FLAGS": " ".join(x for x in (user, autotune, *flags) if x),
        }
        try:
            proc = subprocess.run(
                [sys.executable, str(CHILD), "--exported", str(exported), "--config",
                 str(config), "--devices", str(devices), "--hlo-out", str(hlo_out)],
                env=env, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise PgleError(
                f"the {arm} arm's compile ran past {COMPILE_TIMEOUT_S:.0f} s."
            ) from None
        log_path.write_text(proc.stderr)
        # jax <= 0.8.3 cannot autotune without a GPU: compile again with autotuning off.
        if not autotune and "Expect autotune result cache hit" in proc.stderr + proc.stdout:
            autotune = AUTOTUNE_OFF
            notes.append(
                f"{arm}: this XLA cannot autotune without a GPU; compiled with {AUTOTUNE_OFF}"
            )
            continue
        break
    result: dict[str, Any] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            with contextlib.suppress(ValueError):
                result = json.loads(line[7:])
    if not result.get("ok"):
        why = result.get("error") or (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PgleError(f"the {arm} arm's deviceless compile failed: {why} (log: {log_path}).")
    module = hlo_text.parse(hlo_out.read_text())
    stats = xla_stats.parse(proc.stderr)
    return {
        "module_hlo": module,
        "stats": stats,
        "log": str(log_path),
        "hlo": str(hlo_out),
        "flags": env["XLA_FLAGS"],
        "env": env_extra,
        "child": result,
    }
