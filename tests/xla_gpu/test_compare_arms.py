"""`pgle tune --compare default,o1,sol,pgle,o1+pgle` on the real XLA:GPU compiler (deviceless,
8 H100s, no GPU): each arm's settings reach XLA and change the schedule it compiles (issue 22).

The workload (arm_workload.py) compiles one sharded step (an all-gather the compute does not
need, then a psum) and the harness keeps each arm's scheduled HLO (hlo/). The user's own
XLA_FLAGS turn XLA's speed-of-light estimator off, so that jax 0.10.2's default (SoL on, which
already runs the latency-hiding scheduler on Hopper) does not hide what each arm changes:

- default: no latency-hiding scheduler: nothing between all-gather-start and -done;
- o1 (JAX_OPTIMIZATION_LEVEL=O1) and sol (the SoL flag, over the user's `false`): the
  scheduler runs and overlaps the all-gather with the compute;
- pgle and o1+pgle: XLA reads the profile (served from a profile store, by fingerprint: tune's
  own collect makes an empty profile without a GPU) whose collectives cost almost nothing, so
  the scheduler overlaps less than SoL guessed: the profile, not only the scheduler, decides.

And the honest-arms premise: tune's collect runs with command buffers off and the arms with
the user's flags; the fingerprint XLA looks profiles up by is the same in both.

Marker `xla_gpu`; needs the lane venv of jax 0.10.2 (.ci/xla_gpu_lane.sh).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import lane  # noqa: E402
from test_live import BOOT, _dep_paths, python_of  # noqa: E402

pytestmark = pytest.mark.xla_gpu

VERSION = "0.10.2"
WORKLOAD = HERE / "arm_workload.py"
SCHEDULE = REPO / "tests" / "helpers" / "deviceless_schedule.py"
SOL = "--xla_gpu_enable_analytical_sol_latency_estimator"
FP = re.compile(r'fingerprint_before_lhs="([0-9a-f]{32})"')


def _pgle(python: str, *args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-c", BOOT, str(REPO), _dep_paths(), *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=1200)


def _between(hlo: Path) -> dict[str, list[str]]:
    """Per async start: the work XLA scheduled between it and its done."""
    from pgle.analysis.schedule import async_pairs

    return {p.start: p.between for p in async_pairs(hlo.read_text())}


def _hlo(folder: Path) -> Path:
    (f,) = sorted((folder / "hlo").glob("*jit_body*.txt"))
    return f


def test_each_arm_reaches_xla_and_changes_the_schedule(tmp_path):
    python = python_of(VERSION)
    # The module's instruction names and fingerprint, from one deviceless compile.
    names_file, text_file = tmp_path / "names.txt", tmp_path / "module.txt"
    for out, extra in ((names_file, ["--names"]), (text_file, [])):
        p = subprocess.run([python, str(SCHEDULE), str(out), *extra], capture_output=True,
                           text=True, env=lane.venv_env(), timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
    names = names_file.read_text().split()
    fingerprint = FP.search(text_file.read_text()).group(1)
    # A profile whose collectives cost nearly nothing, in a store keyed as the runs report.
    cheap = tmp_path / "cheap" / f"{fingerprint}.pbtxt"
    cheap.parent.mkdir()
    cheap.write_text("".join(
        f'costs {{ name: "{n}" cost_us: {0.01 if "all-" in n else 1000.0} }}\n' for n in names))
    env = lane.venv_env(XLA_FLAGS=f"{SOL}=false")
    store = tmp_path / "store"
    p = _pgle(python, "store", "add", str(store), str(cheap.parent), "--device-kind", "cpu",
              cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr[-3000:]

    p = _pgle(python, "tune", "--compare", "default,o1,sol,pgle,o1+pgle", "--repeat", "1",
              "--store", str(store), "--per-module", "--json", "--run-dir", "t",
              str(WORKLOAD), cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr[-4000:]
    report = json.loads(p.stdout)
    top = tmp_path / "t"
    arms = {r["arm"]: r for r in report["compare"]["arms"]}
    assert list(arms) == ["default", "o1", "sol", "pgle", "o1+pgle"]
    folder = {a: top / r["folders"][0] for a, r in arms.items()}

    # What reached jax and XLA, arm by arm.
    for arm, f in folder.items():
        out = (f / "workload.log").read_text()
        level = re.search(r"jax_optimization_level=(\w+)", out).group(1)
        assert level == ("O1" if "o1" in arm else "UNKNOWN"), (arm, level)
        seen = re.search(r"^XLA_FLAGS=(.*)$", out, re.M).group(1)  # as XLA read them
        assert f"{SOL}={'true' if arm == 'sol' else 'false'}" in seen.split(), (arm, seen)
        assert "command_buffer" not in seen, (arm, seen)  # collect's change stays in collect
        reads = re.findall(r"Using PGLE profile from (\S+)", out)
        if "pgle" in arm:
            assert reads and reads[0].endswith(f"{fingerprint}.pbtxt"), (arm, out[-2000:])
            assert arms[arm]["status"] == "applied"
        else:
            assert not reads and arms[arm]["status"] is None

    # ... and what it did to the schedule.
    sched = {arm: _between(_hlo(f))["all-gather-start"] for arm, f in folder.items()}
    assert sched["default"] == []  # SoL off, no O1, no profile: no latency-hiding scheduler
    assert sched["o1"] and sched["o1"] == sched["sol"]  # O1 / the SoL flag turn it on
    assert sched["pgle"] and sched["pgle"] != sched["sol"]  # the profile's costs decide
    assert len(sched["pgle"]) < len(sched["sol"])  # cheap collectives: less overlap
    assert sched["o1+pgle"] == sched["pgle"]  # the profile wins over O1's estimator

    # Honest arms: collect ran with command buffers off, the arms with the user's flags; the
    # fingerprint XLA looks a profile up by is the same.
    collect_seen = re.search(r"^XLA_FLAGS=(.*)$", (top / "collect" / "workload.log")
                             .read_text(), re.M).group(1)
    assert "--xla_gpu_enable_command_buffer=''" in collect_seen.split()
    fps = {a: FP.search(_hlo(f).read_text()).group(1) for a, f in folder.items()}
    fps["collect"] = FP.search(_hlo(top / "collect").read_text()).group(1)
    assert set(fps.values()) == {fingerprint}, fps
