"""Helpers every test may import (`from helpers.pgle_testing import ...`): run pgle as a user
would, in real subprocesses, and read what it printed. pytest puts tests/ on sys.path
(pyproject `pythonpath`), so `helpers` is importable from every test folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
WORKLOADS = TESTS / "workloads"
EXAMPLES = REPO / "examples"
DATA = TESTS / "data"


def marked_steps_script(steps: int, size: int) -> str:
    """A script of `steps` marked steps of one small jitted function, synced once at the end."""
    return f"""
import jax, jax.numpy as jnp

@jax.jit
def step(x):
    return jnp.sin(x) @ x

x = jnp.ones(({size}, {size}))
for i in range({steps}):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        x = step(x) / {size}
x.block_until_ready()
"""


def pgle_env(**extra: str) -> dict[str, str]:
    """A clean environment: no PGLE-related variables from the developer's shell (the
    mutation run's own, PGLE_MUTATION_*, stay: tests/mutants/site/mutation_setup.py)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XLA_", "JAX_", "TF_CPP_", "PGLE_"))
           or k.startswith("PGLE_MUTATION_")}
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.update(extra)
    if any(k.startswith("REPLAY_") for k in extra):
        env = replay_env(env)
    return env


def pythonpath(*first: str) -> str:
    """`first`, then the caller's PYTHONPATH: a stand-in module shadows the real one while the
    pgle under test (a worktree, the mutation runner's copy) stays the one imported."""
    return os.pathsep.join(p for p in (*first, os.environ.get("PYTHONPATH")) if p)


def script_json(folder: Path, name: str, text: str, *args: str, timeout: float = 60,
                env: dict[str, str] | None = None) -> Any:
    """Run `text` as the script `folder/name` (ARGS after it) with this tree's pgle (`env`:
    more variables), exit 0 required; the JSON on its last stdout line."""
    script = folder / name
    script.write_text(text)
    proc = subprocess.run([sys.executable, str(script), *args], cwd=folder,
                          env=pgle_env(PYTHONPATH=pythonpath(str(REPO)), **(env or {})),
                          capture_output=True, text=True, encoding="utf-8", timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def replay_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a replay workload (tests/workloads/replay_xla_log.py, dist_replay.py), which
    stands in for a GPU run: tests/helpers/replayed_gpu_run first on PYTHONPATH."""
    stand_in = str(Path(__file__).resolve().parent / "replayed_gpu_run")
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (stand_in, env.get("PYTHONPATH"))
                                                 if p)}


def run_pgle(*args: str, cwd: Path | str, env: dict[str, str] | None = None,
             timeout: float = 300, input: bytes | None = None) -> subprocess.CompletedProcess:
    """`pgle ARGS` exactly as a user runs it (the console script's module)."""
    return subprocess.run(
        [sys.executable, "-m", "pgle", *args], cwd=cwd, env=env or pgle_env(),
        capture_output=True, timeout=timeout, input=input,
    )


def report_of(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout.decode())


def pgle_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [l for l in proc.stderr.decode().splitlines() if l.startswith("pgle:")]


def write_profile(path: Path, costs: dict[str, float]) -> Path:
    from pgle.profiles.files import Profile, write_profile as write

    write(Profile(costs=list(costs.items())), path, force=True)
    return path


def encode_varint(n: int) -> bytes:
    """Protobuf's base-128 varint, for tests that build profile wire bytes by hand."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_double(x: float) -> bytes:
    """A little-endian double (protobuf's fixed64 `double`)."""
    import struct

    return struct.pack("<d", x)


def python_without(tmp: Path, *hidden: str) -> list[str]:
    """A command that runs `python -m pgle` on this interpreter with the named distributions
    truly absent: site-packages is mirrored (symlinks) into `tmp` without their entries and
    loaded as the only site dir (`-S` + site.addsitedir), so `import` and `find_spec` fail as on
    a machine where they were never installed."""
    import site

    mirror = tmp / ("site-without-" + "-".join(hidden))
    mirror.mkdir(parents=True, exist_ok=True)
    names = {h.lower().replace("-", "_") for h in hidden}
    for sp in site.getsitepackages():
        for entry in Path(sp).iterdir():
            stem = entry.name.split("-")[0].removesuffix(".py").lower()
            if stem in names or (mirror / entry.name).exists():
                continue
            (mirror / entry.name).symlink_to(entry)
    code = (f"import runpy, site; site.addsitedir({str(mirror)!r}); "
            "runpy.run_module('pgle', run_name='__main__', alter_sys=True)")
    return [sys.executable, "-S", "-c", code]
