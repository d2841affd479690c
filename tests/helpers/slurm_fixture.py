"""A real one-node SLURM cluster for tests that run `srun -n 2 ...`.

Imported by tests/conftest.py (fixtures) and the SLURM tests:

    from helpers.slurm_fixture import slurm_cluster, requires_slurm  # noqa: F401

and in a test module:

    pytestmark = requires_slurm          # or @slurm_test on one test

    def test_two_ranks(slurm_cluster):
        proc = slurm_cluster.srun(["python", "w.py"], ntasks=2)
        assert proc.returncode == 0, proc.stderr

`slurm_cluster` (session scope) yields a `SlurmCluster`. It uses a cluster
that is already up (CI starts it with .ci/slurm.sh), or starts one with
tests/cluster/slurm_up.sh and stops it at the end of the session. When srun is
missing or the cluster cannot be started, the test is skipped with the reason;
with PGLE_REQUIRE_SLURM=1 (CI) it fails instead, so CI can never pass by
skipping every multi-process test.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]  # tests/
UP = HERE / "cluster" / "slurm_up.sh"
DOWN = HERE / "cluster" / "slurm_down.sh"
NODE = "localhost"

# Marks a test as needing the cluster and pulls in the fixture (which skips
# or fails with the reason). Registered in pyproject.toml's markers.
requires_slurm = [pytest.mark.slurm, pytest.mark.usefixtures("slurm_cluster")]


def _apply(marks, fn):
    for mark in marks:
        fn = mark(fn)
    return fn


def slurm_test(fn):
    """Decorator form of `requires_slurm` for a single test."""
    return _apply(requires_slurm, fn)


_TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


@dataclasses.dataclass(frozen=True)
class SbatchResult:
    job_id: str
    state: str  # COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
    exit_code: int  # the batch script's


@dataclasses.dataclass
class SlurmCluster:
    node: str
    cpus: int
    started_here: bool  # True: this session started it and stops it at the end
    state_dir: Path  # slurm_up.sh's state, spool, pid and log files

    def srun(
        self,
        command: Sequence[str],
        *,
        ntasks: int = 2,
        srun_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: os.PathLike | str | None = None,
        timeout: float = 300,
        time_limit_min: int = 10,
    ) -> subprocess.CompletedProcess:
        """Run `srun -n NTASKS [srun_args] COMMAND`, capture output as text.

        The environment (os.environ plus `env`) reaches every task, as srun
        passes it on by default. The step gets a time limit and a unique job
        name: on `timeout` the job is cancelled with scancel, so no task
        outlives the test (killing srun alone would leave them running).
        """
        name = f"pgle-test-{uuid.uuid4().hex[:12]}"
        argv = ["srun", "-n", str(ntasks), "-J", name, "-t", str(time_limit_min), *srun_args, *command]
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        proc = subprocess.Popen(
            argv, cwd=cwd, env=full_env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            subprocess.run(["scancel", "--name", name], check=False, capture_output=True)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
            raise AssertionError(
                f"srun timed out after {timeout}s and was cancelled: {' '.join(argv)}\n"
                f"--- stdout ---\n{out}\n--- stderr ---\n{err}"
            ) from None
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def sbatch(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: os.PathLike | str | None = None,
        timeout: float = 300,
    ) -> SbatchResult:
        """Submit `sbatch [args]` and wait until the job ends; its state and exit code.

        Faster than `sbatch --wait`, which checks only every few seconds
        (10 s for a job of one second): this asks scontrol every 0.2 s.
        Output goes where `args` say (`-o FILE`).
        """
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        sub = subprocess.run(["sbatch", "--parsable", *args], cwd=cwd, env=full_env, text=True,
                             capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        if sub.returncode != 0:
            raise AssertionError(f"sbatch failed ({sub.returncode}): {sub.stderr.strip()}")
        job_id = sub.stdout.strip().split(";")[0]
        deadline = time.monotonic() + timeout
        while True:
            show = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=30)
            fields = dict(f.split("=", 1) for f in show.stdout.split() if "=" in f)
            state = fields.get("JobState", "")
            if state in _TERMINAL:
                code = int(fields.get("ExitCode", "0:0").split(":")[0])
                return SbatchResult(job_id, state, code)
            if time.monotonic() > deadline:
                subprocess.run(["scancel", job_id], check=False, capture_output=True)
                raise AssertionError(f"batch job {job_id} still {state or 'unknown'} after {timeout}s; cancelled")
            time.sleep(0.2)

    def logs(self) -> str:
        """The tails of slurmctld's and slurmd's logs, for assertion messages."""
        parts = []
        for name in ("slurmctld.log", "slurmd.log"):
            try:
                lines = (self.state_dir / name).read_text(errors="replace").splitlines()[-20:]
            except OSError as err:
                lines = [f"({err})"]
            parts.append(f"--- {name} ---\n" + "\n".join(lines))
        return "\n".join(parts)


def _node() -> tuple[str, int]:
    """The first usable node and its CPUs: "localhost" in the cluster slurm_up.sh starts, any
    name in a cluster that was already up."""
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-t", "idle,mixed,allocated", "-o", "%n %c"], capture_output=True,
            text=True, timeout=15)
        name, cpus = proc.stdout.split()[:2]
        return name, int(cpus)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        return NODE, 0


# The outcome is decided once per session, even if the fixture is defined
# twice (conftest and a test module both importing it): one start, one stop.
_SESSION: dict[str, object] = {}


def _start() -> SlurmCluster | str:
    """The cluster, or the reason it is not available."""
    state_dir = Path(os.environ.get("PGLE_SLURM_STATE", "/var/tmp/pgle-slurm"))
    if not shutil.which("srun"):
        return (
            "SLURM not available: `srun` is not on PATH. Run tests/cluster/slurm_up.sh "
            "as root (it installs slurm-wlm and munge and starts a one-node cluster)."
        )
    try:
        proc = subprocess.run(
            ["bash", str(UP)], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return "SLURM not available: tests/cluster/slurm_up.sh did not finish within 600 s."
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"SLURM not available: tests/cluster/slurm_up.sh exited {proc.returncode}: {last}"
    # slurm_up.sh says "already up" when it found a running cluster (CI's
    # .ci/slurm.sh, a developer's own): not ours to stop. (Asking sinfo first
    # instead would cost ~10 s of its retries when no slurmctld runs.)
    started_here = "already up" not in proc.stderr
    node, cpus = _node()
    return SlurmCluster(node=node, cpus=cpus, started_here=started_here, state_dir=state_dir)


def _stop() -> None:
    subprocess.run(["bash", str(DOWN)], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="session")
def slurm_cluster(request) -> SlurmCluster:
    if "result" not in _SESSION:
        result = _start()
        _SESSION["result"] = result
        if isinstance(result, SlurmCluster) and result.started_here:
            request.config.add_cleanup(_stop)
    result = _SESSION["result"]
    if isinstance(result, str):
        if os.environ.get("PGLE_REQUIRE_SLURM") == "1":
            pytest.fail(f"{result} (PGLE_REQUIRE_SLURM=1: SLURM tests may not be skipped)", pytrace=False)
        pytest.skip(result)
    return result

