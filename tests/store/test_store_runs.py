"""`--store` on collect, run, tune and auto: a recurring job relaunched three times against one
profile store (modules served, added, refreshed), bad store paths refused before any launch,
and concurrent `pgle store add` processes on one store.

Real JAX on CPU in real processes. CPU traces hold no device kernels and XLA:CPU logs no module
fingerprint, so two test-only pieces stand in for what XLA:GPU would print and record:
tests/workloads/replay_xla_log.py (scenario `lookup`) prints XLA:GPU's exact `Fingerprint
before LHS` line per module and answers XLA's directory lookup from the files really in the
directory pgle handed it; tests/helpers/store_cpu_profile (in pgle's process) turns each logged
fingerprint into a small profile. The store key (jax version, device kind `cpu`) comes from the
run's real events.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


from helpers.pgle_testing import DATA, TESTS, WORKLOADS, pgle_env, pgle_lines, report_of, run_pgle

from pgle.profiles.files import read_profile
from pgle.store.store import ProfileStore

REPLAY = str(WORKLOADS / "replay_xla_log.py")
HELPER = str(TESTS / "helpers" / "store_cpu_profile")
FA, FB, FC = "a" * 32, "b" * 32, "c" * 32
TWO = f"jit_train_step:{FA},jit_eval_step:{FB}"
THREE = TWO + f",jit_new_step:{FC}"
REFERENCE = DATA / "nsys" / "pgle_costs_reference"


def env_for(fps: str, cost: float) -> dict[str, str]:
    # TF_CPP_VMODULE: XLA names a module (and its fingerprint) only at VLOG 1; the replay, like
    # XLA, prints that line only when asked (collect --per-module asks by itself, run does not).
    return pgle_env(PYTHONPATH=HELPER, REPLAY_SCENARIO="lookup", REPLAY_FPS=fps,
                    PGLE_TEST_STORE_COST=str(cost), TF_CPP_VMODULE="gpu_hlo_schedule=1")


def jax_version() -> str:
    from importlib.metadata import version

    return version("jax")


def by_fp(rows: list[dict]) -> dict[str, dict]:
    return {r["fingerprint"]: r for r in rows if r.get("fingerprint")}


def test_recurring_job_three_launches_serve_add_refresh(tmp_path):
    store = tmp_path / "store"
    # A run cannot serve from a store that does not exist: exit 2, nothing launched.
    proc = run_pgle("run", "--store", str(store), REPLAY, cwd=tmp_path, env=env_for(TWO, 10))
    assert proc.returncode == 2 and "does not exist" in pgle_lines(proc)[-1], proc.stderr.decode()
    assert not store.exists()

    # Launch 1: tune collects two modules (both new to the store), then runs serving them.
    proc = run_pgle("tune", "--per-module", "--steps", "1:2", "--store", str(store), "--json",
                    REPLAY, cwd=tmp_path, env=env_for(TWO, 10), timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    first = report_of(proc)
    added = first["phases"]["collect"]["store"]
    assert {r["fingerprint"]: r["status"] for r in added["modules"]} == {FA: "added", FB: "added"}
    # The key is the run's own evidence: jax's version, jax's CPU device kind.
    assert added["key"]["jax"] == jax_version() and added["key"]["device_kind"] == "cpu"
    served = by_fp(first["modules"])
    assert served[FA]["store"]["source"].startswith("pgle collect ")
    assert served[FA]["store_age_seconds"] >= 0 and served[FB]["store"] is not None
    assert first["phases"]["run"]["store"]["served"] == [FA, FB]
    view = Path(first["phases"]["run"]["store"]["view"])
    # XLA found each module's profile on its first lookup: <fp>.pbtxt.
    assert sorted(p.name for p in view.iterdir()) == [f"{FA}.pbtxt", f"{FB}.pbtxt"]
    assert read_profile(view / f"{FA}.pbtxt").costs == [("fusion.0", 10.0), ("all-reduce.1", 20.0)]

    # Launch 2: the job now compiles a third module; run serves the two the store has and
    # names the one it lacks, in the JSON rows and in the text summary.
    proc = run_pgle("run", "--store", str(store), "--json", REPLAY, cwd=tmp_path,
                    env=env_for(THREE, 10), timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    second = report_of(proc)
    rows = by_fp(second["modules"])
    assert rows[FA]["store"] and rows[FB]["store"] and rows[FC]["store"] is None
    assert second["store"]["served"] == [FA, FB] and second["store"]["missing"] == [FC]
    assert rows[FA]["store_age_seconds"] >= served[FA]["store_age_seconds"]
    assert any(f"not in the store: 1 module: jit_new_step ({FC})" in s for s in second["summary"])
    assert any("old (pgle collect" in s for s in second["summary"])
    # Same store content, same view path: the compilation cache key stays valid.
    assert second["store"]["view"] == str(view)

    # Launch 3: tune again with new timings: the two known modules are refreshed (replace
    # keeps one entry each), the new one is added, and the run serves all three.
    proc = run_pgle("tune", "--per-module", "--steps", "1:2", "--store", str(store), "--json",
                    REPLAY, cwd=tmp_path, env=env_for(THREE, 30), timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()
    third = report_of(proc)
    statuses = {r["fingerprint"]: r["status"] for r in third["phases"]["collect"]["store"]["modules"]}
    assert statuses == {FA: "refreshed", FB: "refreshed", FC: "added"}
    assert all(len(r["removed"]) == 1 for r in third["phases"]["collect"]["store"]["modules"]
               if r["status"] == "refreshed")
    assert third["phases"]["run"]["store"]["served"] == [FA, FB, FC]
    new_view = Path(third["phases"]["run"]["store"]["view"])
    assert new_view != view
    assert read_profile(new_view / f"{FA}.pbtxt").costs == [("fusion.0", 30.0), ("all-reduce.1", 60.0)]
    st = ProfileStore(store)
    assert len(st.entries()) == 3 and {e.device_kind for e in st.entries()} == {"cpu"}
    text = run_pgle("store", "ls", str(store), cwd=tmp_path)
    assert "3 profiles of 3 modules" in text.stderr.decode()


def test_collect_store_needs_per_module_and_a_good_path(tmp_path):
    (tmp_path / "file").write_text("not a store")
    cases = [
        (["collect", "--store", "s"], "add --per-module"),
        (["collect", "--per-module", "--store", "file"], "is not a directory"),
        (["collect", "--per-module", "--store", "s", "--store-policy", "keep:0"], "unknown store policy"),
        (["collect", "--per-module", "--store-policy", "keep:2"], "--store-policy needs --store"),
        (["run", "--profile", "p.pb", "--store", "s"], "exactly one of --profile and --store"),
        (["run"], "exactly one of --profile and --store"),
        (["auto", "--store", "missing"], "does not exist"),
        (["tune", "--store", "file", "--per-module"], "is not a directory"),
    ]
    for args, words in cases:
        proc = run_pgle(*args, REPLAY, cwd=tmp_path, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr.decode())
        assert words in pgle_lines(proc)[-1], (args, proc.stderr.decode())
        assert "Traceback" not in proc.stderr.decode()
    assert not (tmp_path / "s").exists() and not (tmp_path / ".pgle").exists()


def test_auto_store_serves_only(tmp_path):
    store = tmp_path / "store"
    proc = run_pgle("store", "add", str(store), str(REFERENCE), "--device-kind", "cpu",
                    "--jax", jax_version(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    # A small training: serving from the store does not depend on the workload's size.
    proc = run_pgle("auto", "--store", str(store), "--runs", "1", "--json",
                    str(WORKLOADS / "auto_train.py"), "--", "--steps", "3", "--width", "64",
                    "--batch", "16", cwd=tmp_path, timeout=300)
    report = report_of(proc)
    assert report["store"]["view_modules"] == len(list(REFERENCE.glob("*.pbtxt")))
    assert report["store"]["adds"] is False and "only serves" in report["store"]["note"]
    assert report["store"]["key"]["device_kind"] == "cpu"
    view = Path(report["store"]["view"])
    assert sorted(p.stem for p in view.iterdir()) == sorted(p.stem for p in REFERENCE.glob("*.pbtxt"))
    assert any("only serves" in s for s in report["summary"])


def test_concurrent_store_add_processes_through_the_cli(tmp_path):
    store = tmp_path / "store"
    n_modules = len(list(REFERENCE.glob("*.pbtxt")))
    procs = [subprocess.Popen([sys.executable, "-m", "pgle", "store", "add", str(store), str(REFERENCE),
                               "--device-kind", "NVIDIA H100", "--jax", "0.10.2", "--policy", "keep:2",
                               "--source", f"writer {w}", "--json"],
                              cwd=tmp_path, env=pgle_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
             for w in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1].decode() for o in outs]
    reports = [json.loads(o[0].decode()) for o in outs]
    assert all(len(r["modules"]) == n_modules for r in reports)
    st = ProfileStore(store)
    entries = st.entries()
    # keep:2 held under the lock across four writers: two entries per module, whole ones.
    counts = {}
    for e in entries:
        counts[e.fingerprint] = counts.get(e.fingerprint, 0) + 1
        assert not st.read(e).is_empty()
    assert set(counts.values()) == {2} and len(counts) == n_modules
    files = [p for p in (store / "profiles").rglob("*") if p.is_file()]
    assert not [p for p in files if p.name.startswith(".")]  # no temporary file left behind
    assert len(files) == 2 * len(entries)  # every entry: .json + .pbtxt
