"""The live XLA:GPU lane: fresh compiles by the real XLA:GPU compiler of every jax version in the
matrix (deviceless, 8 H100s described by a target config, no GPU needed), judged by the real
`pgle run` (wrapping the compile as its workload) and `pgle verify` commands.

Marker `xla_gpu`: deselected from the default test run (pyproject addopts); CI runs it as its
own step (.ci/xla_gpu_tests.sh). Each version needs a venv with jax, jaxlib, jax-cuda12-plugin
and jax-cuda12-pjrt of that version at $PGLE_LANE_VENVS/jax-<version> (.ci/xla_gpu_lane.sh
makes them; default root ~/.cache/pgle-lane/venvs). A missing venv FAILS the test when
PGLE_REQUIRE_XLA_GPU=1 (CI) and skips it otherwise. The summary names the versions that ran.

pgle runs under the version's own Python (so the workload it launches is that jax), with
pgle's source first on sys.path and pgle's dependencies (click, protobuf, filelock, etils)
appended from this test's interpreter; nothing is installed into the lane venvs.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pgle.evidence import logscan
from pgle.xla import hlo_text

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import lane  # noqa: E402

pytestmark = pytest.mark.xla_gpu

MATRIX = tuple(line.strip() for line in (HERE / "versions.txt").read_text().splitlines()
               if line.strip() and not line.startswith("#"))
VERSIONS = tuple(os.environ.get("PGLE_LANE_VERSIONS", " ".join(MATRIX)).split())
# A CI run never shrinks the matrix silently (.ci/xla_gpu_lane.sh refuses it too): leaving a
# version out takes PGLE_LANE_SUBSET_OK=1, for local runs only, and the summary says so.
LEFT_OUT = [v for v in MATRIX if v not in VERSIONS]
VENVS = Path(os.environ.get("PGLE_LANE_VENVS", Path.home() / ".cache" / "pgle-lane" / "venvs"))
RAN: dict[str, list[str]] = {}

# Runs pgle's CLI from the source tree under another interpreter: pgle.cli lives in cli/
# (pyproject package-dir), so it is registered under that name before pgle.cli.main loads.
BOOT = r"""
import importlib.util, os, sys
root, extra = sys.argv[1], sys.argv[2]
sys.argv = ["pgle"] + sys.argv[3:]
sys.path.insert(0, root)
sys.path += [p for p in extra.split(os.pathsep) if p]
cli = os.path.join(root, "cli")
if os.path.isdir(cli):  # the source tree: pgle.cli is cli/ (a mutation copy has pgle/cli/)
    spec = importlib.util.spec_from_file_location(
        "pgle.cli", os.path.join(cli, "__init__.py"), submodule_search_locations=[cli])
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pgle.cli"] = mod
    spec.loader.exec_module(mod)
    import pgle
    pgle.cli = mod
from pgle.cli.main import main
main()
"""


def _dep_paths() -> str:
    import click
    import etils
    import filelock
    import google.protobuf
    dirs = [Path(click.__file__).parents[1], Path(etils.__file__).parents[1],
            Path(filelock.__file__).parents[1], Path(google.protobuf.__file__).parents[2]]
    return os.pathsep.join(dict.fromkeys(str(d) for d in dirs))


def python_of(version: str) -> str:
    py = VENVS / f"jax-{version}" / "bin" / "python"
    if py.exists():
        return str(py)
    message = (f"no lane venv for jax {version} at {py.parent.parent} (make it with "
               f"PGLE_LANE_VENVS={VENVS} .ci/xla_gpu_lane.sh)")
    if os.environ.get("PGLE_REQUIRE_XLA_GPU") == "1":
        pytest.fail("PGLE_REQUIRE_XLA_GPU=1: " + message)
    pytest.skip(message)


def test_the_whole_matrix_runs():
    if LEFT_OUT and os.environ.get("PGLE_LANE_SUBSET_OK") != "1":
        pytest.fail(f"PGLE_LANE_VERSIONS leaves out jax {' '.join(LEFT_OUT)} of the matrix "
                    "(tests/xla_gpu/versions.txt); set PGLE_LANE_SUBSET_OK=1 for a local run")


@pytest.fixture(scope="module", autouse=True)
def _summary(request):
    yield
    ran = ", ".join(f"{v} ({len(RAN[v])} checks)" for v in VERSIONS if v in RAN) or "none"
    missing = [v for v in VERSIONS if v not in RAN]
    line = f"xla_gpu lane: jax versions that ran: {ran}" + (
        f"; did not run: {' '.join(missing)}" if missing else "") + (
        f"; LEFT OUT OF THE MATRIX (PGLE_LANE_SUBSET_OK=1): {' '.join(LEFT_OUT)}"
        if LEFT_OUT else "")
    # Printed at the end of the run by tests/conftest.py's pytest_terminal_summary.
    request.config.xla_gpu_lane_summary = line


class Lane:
    """One jax version: its Python, quirks, baseline modules and the workload's environment."""

    def __init__(self, version: str, work: Path):
        self.version = version
        self.python = python_of(version)
        self.quirks = lane.Quirks.for_version(version)
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        self.config = work / "h100_sxm.txtpb"
        self.config.write_text(lane.H100_SXM_CONFIG)
        base = lane.run_child(self.python, [lane.LHS_FLAG], work=str(work / "base"),
                              quirks=self.quirks, programs=PROGRAMS)
        assert base.returncode == 0, base.stderr[-3000:]
        self.log_fingerprints = {m.group(1): m.group(3) for m in lane.FP_RE.finditer(base.stderr)}
        self.modules = [m for m in base.modules if m.get("fingerprint_before_lhs")]
        assert [m["module"] for m in self.modules] == MODULES, base.stderr[-3000:]

    def names(self, module: dict) -> list[str]:
        return lane._names_of(module)

    def write_profile(self, path: Path, names: list[str]) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(lane.profile_text([(n, lane.cost_of(n)) for n in names]))
        return path

    def workload_env(self, extra_flags: list[str] = ()) -> dict:
        env = lane.venv_env(**lane.BASE_ENV)
        env.pop("TF_CPP_MIN_LOG_LEVEL")  # pgle turns XLA's INFO log on itself
        flags = list(self.quirks.base_flags) + list(extra_flags)
        if self.quirks.dump:
            flags += [f"--xla_dump_to={self.work / 'dump'}", "--xla_dump_hlo_module_re=jit_prog"]
        env["XLA_FLAGS"] = " ".join(flags)
        return env

    def workload(self, programs: str = "") -> list[str]:
        args = [lane.CHILD, "--", "--config", str(self.config), "--programs",
                programs or PROGRAMS]
        if self.quirks.dump:
            args += ["--dump", str(self.work / "dump")]
        if self.quirks.gpu_alias:
            args.append("--gpu-alias")
        return args

    def pgle(self, *args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run([self.python, "-c", BOOT, str(REPO), _dep_paths(), *args],
                              env=env, cwd=cwd, capture_output=True, text=True, timeout=600)

    def run(self, profile: Path, *, flags: list[str] = (), name: str, programs: str = "",
            env: dict | None = None, workload_args: list[str] = ()) -> tuple[dict, int, Path]:
        """`pgle run --profile P --json --log L COMPILE_CHILD ...`: (report, exit code, log)."""
        cwd = self.work / name
        cwd.mkdir(parents=True, exist_ok=True)
        log = cwd / "xla.log"
        p = self.pgle("run", "--profile", str(profile), "--json", "--log", str(log),
                      "--require-applied", *self.workload(programs), *workload_args,
                      env={**self.workload_env(flags), **(env or {})}, cwd=cwd)
        try:
            report = json.loads(p.stdout)
        except json.JSONDecodeError:
            raise AssertionError(f"pgle run printed no report (exit {p.returncode}):\n"
                                 f"{p.stderr[-4000:]}") from None
        RAN.setdefault(self.version, []).append(f"run {name}")
        return report, p.returncode, log

    def verify(self, log: Path, *args: str) -> dict:
        p = self.pgle("verify", "--json", *args, str(log), env=self.workload_env(),
                      cwd=self.work)
        assert p.returncode in (0, 3), p.stderr[-3000:]
        RAN.setdefault(self.version, []).append(f"verify {log.name}")
        return json.loads(p.stdout)


# Program a (collectives: the clones of jax 0.7.2/0.8.3) and c (a scan): enough to show every
# behaviour the verdicts depend on, at ~1/2 of the lane's compile time.
PROGRAMS = "a,c"
MODULES = ["jit_prog_a_collectives", "jit_prog_c_scan"]


@pytest.fixture(scope="module", params=VERSIONS)
def jax_lane(request, tmp_path_factory):
    return Lane(request.param, tmp_path_factory.mktemp(f"lane-{request.param}"))


def _statuses(report: dict) -> dict:
    return {m["module"]: (m["status"], m["coverage"]) for m in report["modules"]}


def test_good_profile_is_applied(jax_lane):
    lane_ = jax_lane
    names = [n for m in lane_.modules for n in lane_.names(m)]
    report, code, log = lane_.run(lane_.write_profile(lane_.work / "good.pbtxt", names),
                                  name="good")
    silent = lane.vtuple(lane_.version) < (0, 5, 1)  # no checker, or one that prints nothing
    full = None if silent else 1.0
    if lane_.quirks.new_checker and silent:
        # jax 0.4.36-0.5.0: applied, but --require-applied wants a checker that would have
        # said so: exit 3, coverage unknown.
        assert (report["status"], code) == ("applied", 3), report["reasons"]
        assert _statuses(report) == {m: ("applied", None) for m in MODULES}
        return
    assert (report["status"], code) == ("applied", 0), report["reasons"]
    assert _statuses(report) == {m: ("applied", full) for m in MODULES}, report["modules"]
    if full is None:  # jax 0.4.34: no accuracy checker, so the fit is unverified
        assert all(any("unverified" in n for n in m["notes"]) for m in report["modules"])
    # The saved log gives the same verdict through `pgle verify`.
    again = lane_.verify(log, "--require-applied")
    assert again["status"] == "applied" and _statuses(again) == _statuses(report)


def test_per_module_directory_is_applied(jax_lane):
    """`<fp>.pbtxt` per module, keyed by the no-profile compile's fingerprints (what
    `pgle collect --per-module` writes): applied on every version, clones included."""
    lane_ = jax_lane
    d = lane_.work / "per-module"
    for m in lane_.modules:
        lane_.write_profile(d / f"{m['fingerprint_before_lhs']}.pbtxt", lane_.names(m))
    report, code, _ = lane_.run(d, name="dir")
    want = 3 if lane.vtuple(lane_.version) < (0, 5, 1) and lane_.quirks.new_checker else 0
    assert (report["status"], code) == ("applied", want), (report["reasons"], report["modules"])
    assert set(_statuses(report)) == set(MODULES)  # jax >= 0.11: the candidates are apart
    if lane.vtuple(lane_.version) >= (0, 11):
        assert report["sub_compiles"] and all(
            s["recognised_by"].endswith("harness)") or s["recognised_by"] == "module id"
            for s in report["sub_compiles"])
    assert report["directory"]["unused"] == [], report["directory"]


def test_partial_profile(jax_lane):
    lane_ = jax_lane
    a = lane_.modules[0]
    one = [n for n in lane_.names(a) if "fusion" in n or "all-gather-start" in n][:1]
    profile = lane_.write_profile(lane_.work / "partial.pbtxt", one)
    report, code, _ = lane_.run(profile, name="partial")
    if lane_.quirks.new_checker and lane.vtuple(lane_.version) < (0, 5, 1):
        # jax 0.4.36-0.5.0: the WARN checker prints nothing: never "coverage 100%".
        assert code == 3 and all(m["coverage"] is None for m in report["modules"])
        RAN.setdefault(lane_.version, []).append("partial: coverage unknown")
        return
    if lane_.quirks.new_checker:
        assert report["status"] == "partial" and code == 3, report["reasons"]
        cov = _statuses(report)
        assert cov["jit_prog_c_scan"] == ("not_applied", 0.0)
        assert 0 < cov["jit_prog_a_collectives"][1] < 0.5
    else:
        # jax 0.4.34 has no warn-level checker: read, coverage unverified (what its log shows).
        assert report["status"] == "applied" and code == 0
        assert all(m["coverage"] is None for m in report["modules"])


def test_collectives_xla_made_synchronous_are_not_counted(jax_lane):
    """Program d's train step: XLA makes its all-reduce synchronous after scheduling (nothing
    overlaps it), and from jax 0.11.1 under a new name (all-reduce-start -> all-reduce.6), so
    that the accuracy checker asks for a name no profile can hold. A per-module directory
    built from the names the compiled modules run (what a real profile holds) is applied:
    `pgle run` reads the executed HLO; `pgle verify` of its log cannot tell (partial, rule
    collectives_unresolved) unless XLA's pass logged its lines (convert_async_collectives_to_
    sync=3 in TF_CPP_VMODULE)."""
    lane_ = jax_lane
    base = lane.run_child(lane_.python, [lane.LHS_FLAG], work=str(lane_.work / "base-d"),
                          quirks=lane_.quirks, programs="d")
    assert base.returncode == 0, base.stderr[-3000:]
    d = lane_.work / "per-module-d"
    mods = [m for m in base.modules if m.get("fingerprint_before_lhs")]
    for m in mods:
        lane_.write_profile(d / f"{m['fingerprint_before_lhs']}.pbtxt", lane_.names(m))
    renames = lane.vtuple(lane_.version) >= (0, 11, 1)
    names = {m["module"]: lane_.names(m) for m in mods}
    assert ("all-reduce-start" in names["jit_prog_d_train"]) is not renames
    unknown = lane_.quirks.new_checker and lane.vtuple(lane_.version) < (0, 5, 1)
    report, code, log = lane_.run(d, name="dir-d", programs="d")
    assert (report["status"], code) == ("applied", 3 if unknown else 0), (
        report["reasons"], report["modules"])
    train = next(m for m in report["modules"] if m["module"] == "jit_prog_d_train")
    if renames:
        assert train["collectives_converted"] == [
            {"scheduled": "all-reduce-start", "executed": "all-reduce.6"}], train
        assert train["coverage"] == 1.0 and train["rule"] == "converted_to_sync"
    else:
        assert train["collectives_converted"] == [] and train["collectives_missing"] == []
    again = lane_.verify(log)
    if renames:
        row = next(m for m in again["modules"] if m["module"] == "jit_prog_d_train")
        assert (again["status"], row["rule"]) == ("partial", "collectives_unresolved")
    else:
        assert again["status"] == "applied" and _statuses(again) == _statuses(report)
    # The pass's own lines in the log: verify reads what run read from the HLO.
    vmodule = {"TF_CPP_VMODULE": "gpu_hlo_schedule=1,convert_async_collectives_to_sync=3"}
    report, code, log = lane_.run(d, name="dir-d-vlog", programs="d", env=vmodule)
    assert report["status"] == "applied", report["reasons"]
    assert "Added pair: {all-reduce-start" in log.read_text()
    again = lane_.verify(log)
    assert again["status"] == "applied" and _statuses(again) == _statuses(report)
    RAN.setdefault(lane_.version, []).append("collectives made synchronous")


def test_error_strictness_fails_the_compile_and_says_so(jax_lane):
    lane_ = jax_lane
    a = lane_.modules[0]
    one = [n for n in lane_.names(a) if "fusion" in n or "all-gather-start" in n][:1]
    profile = lane_.write_profile(lane_.work / "partial-e.pbtxt", one)
    flag = (lane.CHECKER_ERROR if lane_.quirks.new_checker else lane.OLD_CHECKER)
    report, code, _ = lane_.run(profile, flags=[flag], name="partial-error")
    assert report["status"] == "error", report["reasons"]
    assert "Discarding the profile" in report["reasons"][0]
    assert code != 0
    assert report["modules"][0]["module"] == "jit_prog_a_collectives"


def test_checker_flag_of_the_other_generation_is_refused_before_launch(jax_lane):
    lane_ = jax_lane
    flag = lane.CHECKER_WARN if not lane_.quirks.new_checker else lane.OLD_CHECKER
    profile = lane_.work / "good.pbtxt"
    if not profile.exists():
        lane_.write_profile(profile, [n for m in lane_.modules for n in lane_.names(m)])
    cwd = lane_.work / "lint"
    cwd.mkdir(exist_ok=True)
    p = lane_.pgle("run", "--profile", str(profile), *lane_.workload(),
                   env=lane_.workload_env([flag]), cwd=cwd)
    RAN.setdefault(lane_.version, []).append("run lint")
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.strip().splitlines()[-1].startswith("pgle: error: XLA_FLAGS has --")
    # And the real XLA of this version does abort on it: the verdict of that log names it.
    run = lane.run_child(lane_.python, [lane.LHS_FLAG, flag], work=str(lane_.work / "abort"),
                         quirks=lane_.quirks, programs="a")
    assert run.returncode != 0
    log = lane_.work / "abort.log"
    log.write_text(run.stderr)
    report = lane_.verify(log)
    assert report["status"] == "error" and flag in report["reasons"][0]


def test_clones_jax_0_7_2_and_0_8_3(jax_lane):
    """The collective combiner's `<module>-clone` (jax 0.7.2/0.8.3): files for the clones'
    fingerprints make the module itself miss (its fingerprint changes once the clone reads a
    profile); without clones (combiner off) a single file is plainly applied."""
    lane_ = jax_lane
    clones = {n: fp for n, fp in lane_.log_fingerprints.items() if n.endswith("-clone")}
    if lane_.version not in ("0.7.2", "0.8.3"):
        assert clones == {}, "only jax 0.7.2/0.8.3 schedule clones"
        RAN.setdefault(lane_.version, []).append("no clones")
        return
    assert set(clones) == {m + "-clone" for m in MODULES}
    d = lane_.work / "with-clones"
    for m in lane_.modules:
        names = lane_.names(m)
        lane_.write_profile(d / f"{m['fingerprint_before_lhs']}.pbtxt", names)
        lane_.write_profile(d / f"{clones[m['module'] + '-clone']}.pbtxt", names)
    report, code, _ = lane_.run(d, name="with-clones")
    assert report["status"] == "partial" and code == 3, report["reasons"]
    rows = {m["module"]: m for m in report["modules"]}
    assert set(rows) == set(MODULES)  # clones folded, never rows of their own
    assert not rows["jit_prog_a_collectives"]["profile_found"]
    assert any("changes the module's own fingerprint" in n
               for n in rows["jit_prog_a_collectives"]["notes"])

    names = [n for m in lane_.modules for n in lane_.names(m)]
    off = "--xla_gpu_experimental_enable_heuristic_collective_combining=false"
    report, code, log = lane_.run(lane_.write_profile(lane_.work / "good.pbtxt", names),
                                  flags=[off], name="no-combiner")
    assert (report["status"], code) == ("applied", 0), report["reasons"]
    assert not [fp for name, fp in {m.group(1): m.group(3) for m in
                                    lane.FP_RE.finditer(log.read_text())}.items()
                if name.endswith("-clone")]


def test_parallel_compiles_are_told_apart_by_thread_id(jax_lane):
    """Modules compiled at once from two Python threads, each missing part of the profile:
    their checker blocks interleave. `pgle run` sets TF_CPP_LOG_THREAD_ID=1 (the workload's
    environment here has none), so on jax < 0.7.2 the tsl prefix carries the thread id too
    (absl's always does); pgle's log scanner reads it from every scheduler line, and each
    module's coverage is what the lane reads per thread from the same log."""
    lane_ = jax_lane
    half = [n for m in lane_.modules for n in lane_.names(m)[::2]]
    profile = lane_.write_profile(lane_.work / "half.pbtxt", half)
    report, _, log = lane_.run(profile, name="threads", workload_args=["--threads", "2"])
    text = log.read_text()
    sched = [ln for ln in text.splitlines()
             if "gpu_hlo_schedule.cc" in ln or "profile_guided_latency_estimator.cc" in ln]
    parsed = [logscan.parse_prefix(ln.encode()) for ln in sched]
    assert sched and all(p is not None and p.thread for p in parsed), sched[:5]
    if lane.vtuple(lane_.version) < (0, 7, 2):  # the tsl prefix, with the thread id
        assert all(re.match(r"\d{4}-\d\d-\d\d [\d:.]+: [IWEF] +\d+ external/", ln)
                   for ln in sched), sched[:3]
    truth = lane.read_log(text)
    mine = {m["module"]: m for m in truth["modules"] if m.get("module") in MODULES}
    assert set(mine) == set(MODULES)
    assert len({m["thread"] for m in mine.values()}) == 2  # two compiling threads
    if not lane_.quirks.new_checker or lane.vtuple(lane_.version) < (0, 5, 1):
        # No checker (0.4.35) or a silent one (0.4.38, 0.5.0): coverage stays unknown.
        assert all(m["coverage"] is None for m in report["modules"])
        return
    want = {name: m["checker_found"] / (m["checker_found"] + m["checker_missing"])
            for name, m in mine.items()}
    got = {m["module"]: m["coverage"] for m in report["modules"]}
    assert got == pytest.approx(want), (got, want)


def test_flag_table_matches_this_jaxlib(jax_lane):
    """pgle's flag table, asked of this version's real XLA: every flag it says exists here is
    accepted with every value it allows here (enum values one run each, enum lists whole),
    and every flag it says is gone (removed, or newer than this jax) is an unknown flag."""
    from pgle.xla import flag_probe, flag_table
    from pgle.xla.flags import render_flag
    from pgle.xla.versions import parse_version

    lane_ = jax_lane
    jax = parse_version(lane_.version)
    env = {k: v for k, v in lane_.workload_env().items() if k != "XLA_FLAGS"}
    here = [i for i in flag_table.FLAGS.values()
            if flag_table.exists_in(i, jax) and not flag_table.removed_flag(i.name, jax)]

    def sample(info, k: int) -> str:
        values = flag_table.values_in(info, jax)
        if info.kind == "enum":
            return values[k % len(values)]
        if info.kind == "enum_list":
            return ",".join(values)
        if info.kind == "bool":
            return ("true", "false")[k % 2]
        return flag_table.default_in(info, jax)

    runs = max((len(flag_table.values_in(i, jax)) for i in here if i.kind == "enum"), default=1)
    for k in range(max(runs, 2)):
        text = " ".join(render_flag(i.name, sample(i, k)) for i in here)
        result = flag_probe.probe(text, environ=env, python=lane_.python)
        assert result.accepted, [(v.flag, v.status, v.message) for v in result.rejected()]
    gone = [i.name for i in flag_table.FLAGS.values() if i.name not in {h.name for h in here}]
    gone += [r.pattern for r in flag_table.REMOVED_FLAGS if "*" not in r.pattern
             and (jax >= r.removed_in or (r.since is not None and jax < r.since))]
    result = flag_probe.probe(" ".join(f"--{n}=true" for n in gone), environ=env,
                              python=lane_.python)
    assert {v.name: v.status for v in result.verdicts} == {n: "unknown" for n in gone}
    RAN.setdefault(lane_.version, []).append(f"flag table ({len(here)} here, {len(gone)} gone)")


def test_flags_of_the_newest_jax_under_pgle(jax_lane):
    """pgle running on this jax: `flags explain` knows the flags jax 0.11/0.12 added (ok where
    they exist, an error naming the release elsewhere), and `pgle run` refuses a flag removed
    after jax 0.10.2 before launch, as XLA would abort on it."""
    from pgle.xla.versions import parse_version

    lane_ = jax_lane
    jax = parse_version(lane_.version)
    new = ("--xla_gpu_enable_cupti_multi_subscriber=true "
           "--xla_gpu_experimental_scheduler_memory_fencing_threshold_bytes=0 "
           "--xla_gpu_experimental_scheduler_memory_fencing_slack_windows=2")
    p = lane_.pgle("flags", "explain", "--json", new, env=lane_.workload_env(), cwd=lane_.work)
    rows = json.loads(p.stdout)["flags"]
    if jax >= (0, 11, 1):
        assert p.returncode == 0 and [r["status"] for r in rows] == ["ok"] * 3, rows
    else:
        assert p.returncode == 1 and all("needs jax >= 0.11.1" in r["message"] for r in rows)
    gone = "--xla_gpu_experimental_ragged_all_to_all_use_barrier=true"
    profile = lane_.write_profile(lane_.work / "any.pbtxt", ["fusion"])
    p = lane_.pgle("run", "--profile", str(profile), *lane_.workload(),
                   env=lane_.workload_env([gone]), cwd=lane_.work)
    if jax >= (0, 11, 1) or jax < (0, 9, 1):
        assert p.returncode == 2, p.stderr[-2000:]
        assert p.stderr.strip().splitlines()[-1].startswith(
            "pgle: error: XLA_FLAGS has --xla_gpu_experimental_ragged_all_to_all_use_barrier")
    else:  # 0.9.1-0.11.0 have it
        assert p.returncode == 0, p.stderr[-2000:]
    RAN.setdefault(lane_.version, []).append("flags under pgle")


def _entry_names(lane_: Lane, programs: str) -> tuple[dict, list[str]]:
    """The no-profile compile of `programs` (one module): its record and entry instructions."""
    work = lane_.work / f"base-{programs}"
    base = lane.run_child(lane_.python, [lane.LHS_FLAG], work=str(work), quirks=lane_.quirks,
                          programs=programs, hlo_out=str(work / "hlo"))
    assert base.returncode == 0, base.stderr[-3000:]
    (mod,) = [m for m in base.modules if m.get("fingerprint_before_lhs")]
    module = hlo_text.parse((work / "hlo" / f"{mod['module']}.txt").read_text())
    return mod, [i.name for i in module.entry.instructions]


def test_error_strictness_fails_modules_xla_makes_synchronous_whatever_the_profile(jax_lane):
    """Issue 32: program k's all-gather has nothing to overlap, so XLA makes it synchronous
    after scheduling; jax >= 0.11 renames it (all_gather.N.M), and under ERROR strictness the
    HLO verifier fails the compile with a complete profile. `pgle run` and `pgle verify` say
    the compile failed, quoting XLA; never applied."""
    lane_ = jax_lane
    if not lane_.quirks.new_checker or lane.vtuple(lane_.version) < (0, 11):
        RAN.setdefault(lane_.version, []).append("verifier: n/a before 0.11")
        return
    _, names = _entry_names(lane_, "k")
    profile = lane_.write_profile(lane_.work / "k-complete.pbtxt",
                                  names + ["all-gather-start", "all-gather-done"])
    report, code, log = lane_.run(profile, flags=[lane.CHECKER_ERROR], name="k-error",
                                  programs="k")
    assert report["status"] == "error" and code != 0, report["reasons"]
    (row,) = report["modules"]
    assert (row["status"], row["rule"]) == ("not_applied", "compile_failed"), row
    assert any("during context [hlo verifier]: Expected instruction name to remain the same."
               in n for n in row["notes"]), row["notes"]
    again = lane_.verify(log)
    assert again["status"] == "error"
    assert again["modules"][0]["rule"] == "compile_failed"
    RAN.setdefault(lane_.version, []).append("verifier failure")


def test_a_triton_collective_fusion_missing_from_the_profile(jax_lane):
    """Issue 32: jax >= 0.11 compiles program j's small psum as an async Triton collective
    fusion (fusion-start/-done). A profile without it: `pgle run` reads the executed HLO and
    says an all-reduce is missing; `pgle verify` of the log alone says partial (kind unknown,
    never compute) and how to tell."""
    lane_ = jax_lane
    if not lane_.quirks.new_checker or lane.vtuple(lane_.version) < (0, 5, 1):
        RAN.setdefault(lane_.version, []).append("triton: no printing checker")
        return
    _, names = _entry_names(lane_, "j")
    triton = lane.vtuple(lane_.version) >= (0, 11)
    assert ("fusion-start" in names) is triton, names
    kept = [n for n in names if not n.startswith(("fusion-start", "fusion-done", "all-reduce"))]
    profile = lane_.write_profile(lane_.work / "j-no-psum.pbtxt", kept)
    report, code, log = lane_.run(profile, name="j-no-psum", programs="j")
    (row,) = report["modules"]
    assert (report["status"], code, row["status"], row["rule"]) == (
        "partial", 3, "partial", "collectives"), (report["reasons"], row)
    assert any("all-reduce" in n for n in row["notes"]), row["notes"]
    again = lane_.verify(log)
    (vrow,) = again["modules"]
    assert again["status"] == "partial"
    assert vrow["rule"] == ("async_unknown" if triton else "collectives"), vrow
    RAN.setdefault(lane_.version, []).append("triton collective fusion")
