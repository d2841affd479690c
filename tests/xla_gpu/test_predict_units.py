"""`tune --compare --predict` in process on the real XLA:GPU compiler (deviceless, no GPU):
`pgle.commands.compare.predict` and the arguments `pgle.commands.tune.body` hands it, so the
mutation run (tests/mutants/score.py, which maps a mutant only to tests that reach its function
in the test process) judges them. What a user sees is pinned: each arm's predicted ratio and
its direction, `why`, the target, the device count, whose costs priced the schedules (the
collected profile or costs derived from the module), `cannot_help`, the step module, the
predicted line, the table's predicted column and the calibration `--store` keeps.

Needs the CUDA compiler plugin in this test's own interpreter (jax-cuda12-plugin and
jax-cuda12-pjrt of its jax; `pgle estimate` compiles in children run with sys.executable):
skipped where it is missing, failed instead under PGLE_REQUIRE_XLA_GPU=1 (.ci/xla_gpu_tests.sh
runs it with a venv over the system Python that has the plugin). Markers `xla_gpu` (deselected
by default) and `xla_gpu_inprocess`. Cost: each prediction is one capture run of the step on
emulated CPU devices and one compile per arm (a child each, 2-5 s on the 2-core machine); the
whole file 20-40 s (24 s measured on a quiet machine, 40 s loaded)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
from pathlib import Path

import pytest

from pgle.commands import arms, compare, estimate, tune
from pgle.commands.options import CollectOptions, StoreOptions
from pgle.jobs import layout as layouts
from pgle.jobs import ranks
from pgle.launch.workload import Workload
from pgle.profiles.files import Profile, write_profile

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests" / "commands"))
from test_tune_body import COLLECT_WF, RUN_WF, Phases, notices  # noqa: E402

pytestmark = [pytest.mark.xla_gpu, pytest.mark.xla_gpu_inprocess]
STEP = Workload(str(REPO / "tests" / "estimate" / "helps_step.py"), None, ())
H200 = "NVIDIA H200"
# The collected profile's costs: the all-gather expensive, the all-reduce cheap. XLA's scheduler
# (jax 0.10.2, 2 x H200) then moves the all-gather's done later: pgle predicted below 1.
COSTS = [("all-gather-start", 800.0), ("all-reduce-start", 20.0)]
NO_COLLECTIVE = ("PGLE cannot help this module: no async collective in the step module: "
                 "nothing for the scheduler to overlap.")
# A sharded step without collectives (nothing for PGLE to move), run 4 times (the step rule).
LOCAL_STEP = """import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((jax.device_count(),), ("x",))
@jax.jit
def train_step(x):
    return jnp.tanh(x * 2.0)
x = jax.device_put(jnp.ones((jax.device_count() * 8, 64)), NamedSharding(mesh, P("x")))
for _ in range(4):
    x = train_step(x)
print("done", float(x.sum()))
"""


@pytest.fixture(autouse=True)
def _plugin():
    missing = estimate.plugin_missing()
    if missing:
        if os.environ.get("PGLE_REQUIRE_XLA_GPU") == "1":
            pytest.fail(f"PGLE_REQUIRE_XLA_GPU=1: {missing}", pytrace=False)
        pytest.skip(f"needs the CUDA compiler plugin in this interpreter: {missing}")


class CollectsAProfile(Phases):
    """tune's collect phase leaving a real profile (COSTS) where tune asked for it."""

    def __call__(self, name, workflow, opts, run_root):
        result = super().__call__(name, workflow, opts, run_root)
        if name == "collect" and self.collect_status == "collected":
            write_profile(Profile(costs=list(COSTS)), opts.default_output, force=True)
        return result


def tune_with_predict(top: Path, phases: Phases, plan: str, workload: Workload = STEP,
                      **collect):
    copts = CollectOptions(workload=workload, output=None, run_dir=str(top), **collect)
    topts = tune.TuneOptions(copts, repeat=1, compare=arms.parse_arms(plan), predict=True)
    lay = layouts.resolve(tune.request(topts), ranks.detect({}), None)
    return tune.body(topts, lay, phases, {}, collect_workflow=COLLECT_WF, run_workflow=RUN_WF)


def assert_seconds(pred: dict) -> None:
    s = pred["seconds"]
    assert isinstance(s, float) and 0.5 < s < 900 and abs(s * 10 - round(s * 10)) < 1e-6  # 0.1 s


def test_tune_on_a_gpu_predicts_every_arm_with_the_collected_profile(tmp_path, caplog):
    """A GPU tune (2 x H200): the prediction compiles for h200 on 2 devices with the profile
    collect made, and the table shows each arm's predicted ratio beside the measured one."""
    caplog.set_level(logging.INFO, logger="pgle")
    phases = CollectsAProfile(collect={
        "backend": {"platform": "cuda", "device_kind": H200, "device_count": 2}})
    top = tmp_path / "tune"
    report = tune_with_predict(top, phases, "default,pgle,o1,sol,o1+pgle")
    t = report.details["compare"]
    pred = t["predicted"]
    assert pred["why"] is None and pred["cannot_help"] is None
    assert (pred["target"], pred["devices"]) == ("h200", 2)
    assert pred["costs"] == "the collected profile's costs"
    assert pred["step_module"] == "jit_train_step"
    assert pred["run_dir"] == str(top / "predict") and (top / "predict" / "estimate").is_dir()
    assert_seconds(pred)
    # the profile collect made priced the schedules (its all-gather cost is in the one used)
    used = (top / "predict" / "estimate" / "pgle-profile.pbtxt").read_text()
    assert 'name: "all-gather-start"\n  cost_us: 800.0' in used
    r = pred["ratios"]
    assert list(r) == ["default", "pgle", "o1", "sol", "o1+pgle"]
    assert r["default"] == 1.0 and r["o1+pgle"] is None  # estimate does not compile o1+pgle
    assert 0.9 < r["pgle"] < 1.0  # PGLE predicted faster: the all-gather hidden a little more
    assert r["o1"] == pytest.approx(1.0) and r["sol"] == pytest.approx(1.0)
    # the table: predicted beside measured (Phases: the profile halves the step, O1 takes a
    # quarter off, SoL adds half)
    rows = {row["arm"]: row for row in t["arms"]}
    assert {a: rows[a]["predicted_ratio"] for a in rows} == r
    assert rows["pgle"]["ratio"] == pytest.approx(0.5)
    assert rows["sol"]["ratio"] == pytest.approx(1.5)
    line = compare.predicted_line(pred)
    assert line == (f"predicted: pgle estimate, XLA:GPU's scheduler for 2 x h200 (no GPU), every "
                    f"arm's schedule replayed with the collected profile's costs "
                    f"({pred['seconds']:.0f} s; {top / 'predict'})")
    said = notices(caplog)
    assert said[1:3] == ["predicting each arm with pgle estimate (XLA:GPU deviceless, on CPU)",
                         line]
    assert line in report.summary
    assert "calibration" not in t  # no store
    assert json.loads((top / "tune.json").read_text())["compare"]["predicted"] == pred


def test_tune_off_a_gpu_predicts_with_derived_costs_and_keeps_the_calibration(tmp_path, caplog):
    """A tune whose backend is the CPU, with a store: collect's profile is not a GPU's, so it
    prices nothing, and the device kind names no GPU: the default target (h100), costs derived
    from the module and the target, and with no device count from the backend, estimate's 8
    devices (the count it compiled for is the one shown). The step has no collective: PGLE
    cannot help, and the prediction says why. The store keeps each arm's predicted and measured
    ratio next to the step module's entry this collect added."""
    from pgle.store.store import ProfileStore
    from pgle.version import __version__

    caplog.set_level(logging.INFO, logger="pgle")
    fp = "0123456789abcdef0123456789abcdef"
    st = ProfileStore(tmp_path / "store", create=True)
    entry, _ = st.add(fp, Profile(costs=list(COSTS)), jax="0.10.2", jaxlib="0.10.2",
                      device_kind="cpu", device_count=2, source="test", module="jit_train_step")
    key = {"device_kind": "cpu", "device_count": "2", "jax": "0.10.2"}
    phases = Phases(platform="cpu", collect={
        "backend": {"platform": "cpu", "device_kind": "cpu"},
        "store": {"summary": "store: 1 module added", "key": key,
                  "modules": [{"module": "jit_train_step", "fingerprint": fp,
                               "entry": entry.entry_id}]}})
    per_module = dataclasses.replace(CollectOptions(STEP, None).extraction, per_module=True)
    script = tmp_path / "local_step.py"
    script.write_text(LOCAL_STEP)
    top = tmp_path / "tune"
    report = tune_with_predict(top, phases, "default,pgle", Workload(str(script), None, ()),
                               extraction=per_module, store=StoreOptions(str(tmp_path / "store")))
    t = report.details["compare"]
    pred = t["predicted"]
    assert pred["why"] is None and pred["cannot_help"] == NO_COLLECTIVE
    assert (pred["target"], pred["devices"]) == ("h100", 8)
    assert pred["costs"] == "costs derived from the module and the target"
    assert pred["ratios"] == {"default": 1.0, "pgle": 1.0}
    assert pred["step_module"] == "jit_train_step" and pred["run_dir"] == str(top / "predict")
    assert_seconds(pred)
    used = (top / "predict" / "estimate" / "pgle-profile.pbtxt").read_text()
    assert "cost_us: 800.0" not in used
    line = compare.predicted_line(pred)
    assert line.endswith(f"every arm's schedule replayed with costs derived from the module and "
                         f"the target ({pred['seconds']:.0f} s; {top / 'predict'}); "
                         f"{NO_COLLECTIVE}")
    said = notices(caplog)
    assert said[said.index("predicting each arm with pgle estimate (XLA:GPU deviceless, on "
                           "CPU)") + 1] == line and line in report.summary
    kept = {c.arm: c for c in st.calibration(entry)}
    assert {a: (c.predicted_ratio, c.measured_ratio) for a, c in kept.items()} == {
        a: (row["predicted_ratio"], row["ratio"]) for a, row in
        ((row["arm"], row) for row in t["arms"])}
    assert kept["default"].predicted_ratio == 1.0 and kept["pgle"].predicted_ratio == 1.0
    assert {(c.target, c.device_kind, c.device_count, c.jax, c.pgle) for c in kept.values()} == {
        ("h100", "cpu", 2, "0.10.2", __version__)}
    assert t["calibration"] == {"fingerprint": fp, "entry": entry.entry_id, "arms": 2}


def test_a_prediction_that_fails_says_why_in_one_line_and_where(tmp_path):
    """The workload fails on the emulated devices: no ratio, the reason's first line, the
    folder to look in; nothing raised (the tune goes on). A profile that is a folder is not
    handed to estimate (it would refuse it)."""
    script = tmp_path / "fails.py"
    script.write_text("import sys\nprint('bad input', file=sys.stderr)\nsys.exit(3)\n")
    plan = arms.parse_arms("default,pgle,o1+pgle")
    run_dir = tmp_path / "predict"
    pred = compare.predict(plan, workload=Workload(str(script), None, ()),
                           profile=str(tmp_path), device_kind=H200, device_count=2,
                           run_dir=run_dir, in_job=False)
    assert pred == {
        "ratios": {"default": None, "pgle": None, "o1+pgle": None},
        "why": f"pgle estimate failed: the workload exited with 3 on 2 emulated CPU devices; "
               f"see {run_dir / 'workload.log'}.",
        "target": None, "devices": 2, "costs": None, "run_dir": str(run_dir), "seconds": None,
        "cannot_help": None,
    }
    assert "bad input" in (run_dir / "workload.log").read_text()
    assert compare.predicted_line(pred) == "predicted: " + pred["why"]
