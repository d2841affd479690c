"""The job driver where a rank waits on others, in process on real job folders (issue 37).

Each wait has a deadline here, so that a wait that would never end (or only at a 600 s
--gather-timeout) fails its test instead of hanging it: rank 0 gathering under `--gather kv`,
a phase rank waiting for rank 0's job report when rank 0 failed, a report that arrives during
the wait. Also what a stalled rank publishes for the job's first-stopped-rank line, the
watchdog's answer when a peer failed, and the job report's per-rank rows and stall section.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from helpers.deadline import returns_within
from pgle.errors import BadInput, PgleError, Stalled
from pgle.jobs import driver, folder
from pgle.jobs.ranks import RankInfo
from pgle.launch.stall import StallReport
from pgle.report import Report
from pgle.verdicts.across_ranks import combine_verdicts


def _rank_run(tmp_path: Path, rank: int, world: int = 2, **kw) -> driver.RankRun:
    info = RankInfo(rank=rank, world_size=world, job_id="j5", step_id="2", source="slurm")
    jd = tmp_path / "job"
    jd.mkdir(parents=True, exist_ok=True)
    return driver.RankRun("run", info, jd, kw.pop("gather_timeout_s", 0.0), host="node-a", **kw)


def _report(jd: Path, r: int, **fields) -> None:
    data = {"command": "run", "status": "applied", "exit_code": 0, "modules": [],
            "rank": {"rank": r, "host": f"h{r}"}, **fields}
    (jd / f"rank-{r}.json").write_text(json.dumps(data))


def _failed(jd: Path, rank: int, code: int, at: float) -> None:
    (jd / "failed").mkdir(parents=True, exist_ok=True)
    (jd / "failed" / f"rank-{rank}").write_text(json.dumps({"exit_code": code, "time": at}))


def _job_report(rr: driver.RankRun, own: Report) -> Report:
    folder.write_report(rr.job_dir, rr.rank, own)
    return rr.job_report(own, combine_verdicts)


def _atomic(path: Path, text: str) -> None:
    """As a rank writes its files: whole, under a private name first, then renamed."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _later(seconds: float, fn) -> threading.Thread:
    """fn() on another thread after `seconds`: a peer's file arriving while this rank waits."""
    thread = threading.Thread(target=lambda: (time.sleep(seconds), fn()), daemon=True)
    thread.start()
    return thread


def test_under_gather_kv_rank_0_does_not_wait_for_files_in_its_folder(tmp_path):
    # The exchange already waited the timeout: nothing more reaches rank 0's folder.
    rr = _rank_run(tmp_path, 0, gather="kv", gather_timeout_s=120.0)
    with returns_within(10):
        out = _job_report(rr, Report("run", "applied", workload_exit_code=0))
    assert out.details["job"]["reported"] == [0]
    assert [m["rank"] for m in out.details["job"]["missing"]] == [1]


def test_rank_0_waits_for_a_report_that_arrives_during_the_gather(tmp_path):
    rr = _rank_run(tmp_path, 0, gather_timeout_s=120.0)
    rep = {"command": "run", "status": "applied", "exit_code": 0, "modules": [],
           "rank": {"rank": 1, "host": "h1"}}
    thread = _later(0.3, lambda: _atomic(rr.job_dir / "rank-1.json", json.dumps(rep)))
    with returns_within(15):
        out = _job_report(rr, Report("run", "applied", workload_exit_code=0))
    thread.join()
    assert out.details["job"]["reported"] == [0, 1] and out.exit_code == 0


def test_a_phase_rank_gives_up_at_once_when_rank_0_failed_and_said_why(tmp_path):
    rr = _rank_run(tmp_path, 1, gather_timeout_s=120.0)
    _failed(rr.job_dir, 0, 2, at=1.0)
    _report(rr.job_dir, 0, status="error", exit_code=2, pgle_error="bad --profile")
    with returns_within(10), pytest.raises(PgleError) as err:
        rr.wait_for_job_report()
    assert err.value.message == "rank 0 failed, so there is no job report: bad --profile"


def test_a_phase_rank_is_not_misled_by_another_ranks_failure(tmp_path):
    # Rank 1's own failure file and report are not rank 0's: it waits for the job report.
    rr = _rank_run(tmp_path, 2, world=3, gather_timeout_s=120.0)
    _failed(rr.job_dir, 1, 2, at=1.0)
    _report(rr.job_dir, 1, status="error", exit_code=2, pgle_error="rank 1's own trouble")
    _report(rr.job_dir, 0, status="error", exit_code=2, pgle_error="not failed")
    thread = _later(0.3, lambda: _atomic(rr.job_dir / "job.json", '{"status": "applied"}'))
    with returns_within(15):
        assert rr.wait_for_job_report() == {"status": "applied"}
    thread.join()


def test_a_job_report_that_cannot_be_read_says_why_in_the_systems_words(tmp_path):
    rr = _rank_run(tmp_path, 1)
    (rr.job_dir / "job.json").mkdir()
    with pytest.raises(PgleError) as err:
        rr.wait_for_job_report()
    assert err.value.message == f"job report {rr.job_dir / 'job.json'}: job.json is not a regular file."


def test_a_stalled_rank_publishes_its_main_process_phase(tmp_path):
    rr = _rank_run(tmp_path, 1)
    fleet_dir = rr.job_dir / "fleet"
    fleet_dir.mkdir()
    # Rank 0's phase is there already: rank 1 does not wait for it.
    (fleet_dir / "rank-0.stall.json").write_text(json.dumps(
        {"rank": 0, "phase": "collective", "what": "in all-reduce", "own": False}))
    report = StallReport(seconds=700.0, bound_s=600.0, bound_rule="", run=str(tmp_path),
                         phases={200: "in a helper", 100: "in user code"},
                         phase_names={200: "helper", 100: "user_code"}, stacks={})
    # Well within fleet.PEER_PHASE_WAIT_S (10 s): every rank's phase is there, no wait.
    with returns_within(5):
        rr._stalled(report)
    assert json.loads((fleet_dir / "rank-1.stall.json").read_text()) == {
        "rank": 1, "phase": "user_code", "what": "in user code", "own": True}
    nothing = StallReport(seconds=700.0, bound_s=600.0, bound_rule="", run=str(tmp_path),
                          phases={}, phase_names={}, stacks={})
    with returns_within(5):
        rr._stalled(nothing)
    assert json.loads((fleet_dir / "rank-1.stall.json").read_text()) == {
        "rank": 1, "phase": None, "what": None, "own": True}


def test_the_watchdog_stops_for_a_peer_and_not_for_its_own_failure(tmp_path):
    rr = _rank_run(tmp_path, 1, world=3)
    poll = rr.watchdog()
    _failed(rr.job_dir, 1, 4, at=1.0)  # its own: not a reason to stop
    assert poll() is None and rr.stopped_for is None
    _failed(rr.job_dir, 2, 7, at=2.0)
    assert driver.RankRun.watchdog(rr)() == 7
    assert rr.stopped_for == folder.PeerFailure(2, 7)


@pytest.mark.parametrize(
    "fields",
    [{"exit_code": Stalled.exit_code, "workload_exit_code": 0},
     {"exit_code": 0, "workload_exit_code": Stalled.exit_code}],
)
def test_either_exit_code_of_a_stalled_rank_adds_the_stall_section(tmp_path, fields):
    rr = _rank_run(tmp_path, 0)
    jd = rr.job_dir
    _report(jd, 1, **fields)
    (jd / "fleet").mkdir()
    for r, steps, phase in ((0, 5, "collective"), (1, 3, "user_code")):
        (jd / "fleet" / f"rank-{r}.json").write_text(json.dumps(
            {"rank": r, "steps": steps, "last_progress": 10.0 + r}))
        (jd / "fleet" / f"rank-{r}.stall.json").write_text(json.dumps(
            {"rank": r, "phase": phase, "what": f"what {r}"}))
    with returns_within(10):
        out = _job_report(rr, Report("run", "applied", workload_exit_code=0))
    assert out.details["stall"]["first_rank"] == 1


def test_a_job_without_a_stall_has_no_stall_section_and_no_wait(tmp_path):
    rr = _rank_run(tmp_path, 0, world=3)
    _report(rr.job_dir, 1)
    # Rank 2's report holds its rank as a bare number (as reports of other commands do).
    _report(rr.job_dir, 2, stopped_for={"rank": 1, "exit_code": 7}, rank=2,
            warnings=["disk slow"])
    with returns_within(10):
        out = _job_report(rr, Report("run", "applied", workload_exit_code=0,
                                     warnings=["disk slow"]))
    assert "stall" not in out.details
    rows = {row["rank"]: row for row in out.details["ranks"]}
    assert rows[2]["stopped_for"] == {"rank": 1, "exit_code": 7}
    assert rows[1]["stopped_for"] is None
    assert (rows[1]["host"], rows[2]["host"]) == ("h1", None)
    # A warning of two of the three ranks names them.
    assert "ranks 0, 2: disk slow" in out.warnings


def test_a_quiet_report_prints_its_line_alone(tmp_path):
    rep = Report("run", "applied", warnings=["w"])
    rep.details["x"] = 1
    quiet = driver.QuietReport.of(rep, "rank 1 of 2: applied")
    assert (quiet.details, quiet.warnings, quiet.summary) == ({}, [], ["rank 1 of 2: applied"])
    assert quiet.full is not None and quiet.full["warnings"] == ["w"]


# -- a rank that fails in pgle: what its peers and rank 0 learn --------------------------------


def _raises(exc: BaseException):
    def produce() -> Report:
        raise exc
    return produce


def _failure(jd: Path, rank: int) -> tuple[dict, dict]:
    """(failed/rank-<r>, rank-<r>.json) a failing rank leaves for its peers and rank 0."""
    return (json.loads((jd / "failed" / f"rank-{rank}").read_text()),
            json.loads((jd / f"rank-{rank}.json").read_text()))


@pytest.mark.parametrize(
    "exc,code,said",
    [(KeyboardInterrupt(), 130, "interrupted"),
     (RuntimeError("disk on fire"), 1, "RuntimeError: disk on fire")],
)
def test_a_rank_that_fails_in_pgle_tells_its_peers_with_the_exit_code(tmp_path, exc, code, said):
    rr = _rank_run(tmp_path, 1)
    with pytest.raises(type(exc)):
        rr._guarded(_raises(exc))
    failed, report = _failure(rr.job_dir, 1)
    assert failed["exit_code"] == code
    assert (report["exit_code"], report["pgle_error"]) == (code, said)
    assert folder.peer_failure(rr.job_dir, 0) == folder.PeerFailure(1, code)


def test_a_taken_rank_names_itself_and_writes_nothing(tmp_path):
    rr = _rank_run(tmp_path, 1)
    taken = folder.RankTaken("job folder x already holds rank-1.start.")
    with pytest.raises(folder.RankTaken) as err:
        rr._guarded(_raises(taken))
    assert err.value.message == "rank 1: job folder x already holds rank-1.start."
    assert sorted(p.name for p in rr.job_dir.iterdir()) == []


def _stalled_fleet(jd: Path) -> None:
    """Both ranks' progress and stall phases, and modules that differ between them."""
    (jd / "fleet").mkdir(exist_ok=True)
    (jd / "rank-0").mkdir(exist_ok=True)
    (jd / "rank-0" / "m.mlir").write_text("x\n")
    for r, steps, phase, fp in ((0, 5, "collective", "a"), (1, 3, "user_code", "b")):
        (jd / "fleet" / f"rank-{r}.json").write_text(json.dumps(
            {"rank": r, "steps": steps, "last_progress": 10.0 + r,
             "modules": [["jit_step", fp * 32, "rank-0/m.mlir"]]}))
        (jd / "fleet" / f"rank-{r}.stall.json").write_text(json.dumps(
            {"rank": r, "phase": phase, "what": f"what {r}"}))


def test_rank_0s_stall_error_names_the_first_stopped_rank_and_the_divergence(tmp_path):
    rr = _rank_run(tmp_path, 0)
    _stalled_fleet(rr.job_dir)
    with returns_within(10), pytest.raises(Stalled) as err:
        rr._guarded(_raises(Stalled("the workload made no progress for 10 min")))
    e = err.value
    assert e.message == ("rank 0: the workload made no progress for 10 min; rank 1 stopped "
                         "progressing first (after 3 steps): what 1; rank 0 waited for it in a "
                         "collective")
    assert e.fleet is not None and e.fleet["stall"]["first_rank"] == 1
    assert [d["module"] for d in e.fleet["divergence"]] == ["jit_step"]
    failed, report = _failure(rr.job_dir, 0)
    assert failed["exit_code"] == Stalled.exit_code
    assert report["pgle_error"] == "the workload made no progress for 10 min"


def test_another_ranks_stall_error_is_its_own(tmp_path):
    rr = _rank_run(tmp_path, 1)
    _stalled_fleet(rr.job_dir)
    with returns_within(10), pytest.raises(Stalled) as err:
        rr._guarded(_raises(Stalled("no progress")))
    assert (err.value.message, err.value.fleet) == ("rank 1: no progress", None)



def test_an_exchange_with_an_ended_workload_ends_at_once(tmp_path):
    # The workload process is gone: no answer will come, whatever the timeout says.
    import subprocess
    import sys
    import types

    from pgle.evidence import schema
    from pgle.jobs import kv

    run = tmp_path / "run"
    (run / schema.HANDOFF_DIR).mkdir(parents=True)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    ex = types.SimpleNamespace(run=types.SimpleNamespace(path=str(run)),
                               result=types.SimpleNamespace(
                                   pending=types.SimpleNamespace(child=child)))
    with returns_within(10):
        fetched, errors = kv.HeldExchange(ex).round({}, ["pgle/run/job"], final=True,
                                                    timeout_s=120.0)
    assert fetched == {}
    assert errors == ["the workload's process ended before answering (it crashed, or "
                      "jax.distributed stopped it)"]


# -- a real workload on a rank whose peer failed ------------------------------------------------


def test_a_rank_stops_its_workload_at_once_when_a_peer_failed_and_says_where_it_was(tmp_path):
    from pgle import api
    from pgle.profiles.files import Profile, write_profile

    ready = tmp_path / "ready"
    script = tmp_path / "w.py"
    script.write_text(f"import pathlib, time\npathlib.Path({str(ready)!r}).touch()\n"
                      "time.sleep(600)\n")
    write_profile(Profile(costs=[("fusion.1", 1.0)]), tmp_path / "p.pb")
    jd = tmp_path / "job"

    def fail_rank_0() -> None:
        # Once the workload sleeps (not while it starts), rank 0's workload fails with 5.
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        _failed(jd, 0, 5, at=1.0)

    peer = threading.Thread(target=fail_rank_0, daemon=True)
    peer.start()
    ranks = ("PGLE_RANK", "PGLE_WORLD_SIZE", "PGLE_LOCAL_RANK", "PGLE_JOB_ID")
    env = {k: v for k, v in os.environ.items()
           if k not in ranks and not k.startswith(("XLA_", "JAX_", "TF_CPP_", "SLURM_", "OMPI_",
                                                   "PMI_"))}
    env.update(JAX_PLATFORMS="cpu", PGLE_RANK="1", PGLE_WORLD_SIZE="2", PGLE_JOB_ID="api")
    # The workload sleeps 600 s: only the watchdog's stop ends it within the deadline.
    with returns_within(60):
        api.run(str(script), profile=str(tmp_path / "p.pb"), job_dir=str(jd),
                run_dir=str(tmp_path / "r%r"), environ=env)
    peer.join()
    exit_ = json.loads((jd / "rank-1.exit").read_text())
    assert (exit_["exit_code"], exit_["stopped_for"]) == (5, 0)
    # Where its workload was when stopped, for rank 0's first-stopped-rank line (issue 36).
    assert json.loads((jd / "fleet" / "rank-1.stall.json").read_text()) == {
        "rank": 1, "own": False, "phase": "user_code",
        "what": "in the user's code at w.py:3 (<module>): `time.sleep(600)`"}
    assert json.loads((jd / "fleet" / "rank-1.json").read_text())["rank"] == 1


# -- rank 0 of a job through driver.run, its body not launching anything ------------------------


def _job_env(rank: int) -> dict[str, str]:
    return {"HOME": "/h", "PGLE_RANK": str(rank), "PGLE_WORLD_SIZE": "2", "PGLE_JOB_ID": "e37"}


def _workflow(seen: dict, combine):
    from pgle.jobs.layout import LayoutRequest

    def body(o, lay, launch, env):
        seen.update(lay=lay, env=env)
        return Report("run", "applied", workload_exit_code=0)

    def combining(o, lay, job):
        seen.update(combine_opts=o, combine_lay=lay)
        return combine(job)

    return driver.Workflow("run", lambda o: LayoutRequest(log="l%r.log"), body, combining)


def test_rank_0_gathers_within_the_users_gather_timeout(tmp_path):
    from pgle.jobs.layout import JobOptions

    seen: dict = {}
    opts = object()
    jd = tmp_path / "job"
    with returns_within(15):
        out = driver.run(_workflow(seen, combine_verdicts), opts,
                         JobOptions(job_dir=str(jd), gather_timeout=0.2), environ=_job_env(0))
    assert out.details["job"]["gather_timeout_s"] == 0.2
    assert out.details["job"]["missing"] == [{"rank": 1, "why": "never started"}]
    assert out.command == "run" and out.exit_code == 1
    assert seen["combine_opts"] is opts and seen["combine_lay"] is seen["lay"]
    assert seen["lay"].log == "l0.log" and seen["env"] == _job_env(0)
    # Its claim on rank 0, before its run: a second process given rank 0 is refused.
    assert json.loads((jd / "rank-0.start").read_text())["rank"] == 0
    assert json.loads((jd / "job.json").read_text())["exit_code"] == 1


@pytest.mark.parametrize(
    "exc,code,said",
    [(BadInput("merge failed"), BadInput.exit_code, "merge failed"),
     (RuntimeError("boom"), 1, "RuntimeError: boom")],
)
def test_rank_0_that_cannot_build_the_job_report_tells_the_waiting_ranks(tmp_path, exc, code,
                                                                          said):
    from pgle.jobs.layout import JobOptions

    def combine(job):
        raise exc

    jd = tmp_path / "job"
    jd.mkdir()
    _report(jd, 1)
    with returns_within(15), pytest.raises(type(exc)):
        driver.run(_workflow({}, combine), None, JobOptions(job_dir=str(jd), gather_timeout=0.0),
                   environ=_job_env(0))
    job = json.loads((jd / "job.json").read_text())
    assert (job["exit_code"], job["pgle_error"]) == (code, said)
    assert job["reasons"] == [f"rank 0 could not build the job report: {said}"]


# -- a phase of tune on a rank other than 0 -----------------------------------------------------


def _phase_workflow(seen: dict):
    from pgle.jobs.layout import LayoutRequest

    def body(o, lay, launch, env):
        seen.update(lay=lay, launch=launch)
        return Report("collect", "applied", workload_exit_code=0)

    return driver.Workflow("collect", lambda o: LayoutRequest(), body,
                           lambda *a: Report("collect", "x"))


def test_a_phase_rank_runs_in_the_phases_folder_and_takes_rank_0s_job_report(tmp_path):
    rr = _rank_run(tmp_path, 1, gather_timeout_s=0.2, stall_timeout_s=900.0, gather="kv",
                   require_same_program=True)
    rr.command = "tune"
    (rr.job_dir / "collect").mkdir()
    (rr.job_dir / "collect" / "job.json").write_text('{"status": "applied", "from": "rank 0"}')
    seen: dict = {}
    root = tmp_path / "root"
    with returns_within(15):
        result = rr.phase({}, "collect", _phase_workflow(seen), None, str(root))
    assert result.job == {"status": "applied", "from": "rank 0"}
    assert rr.last_phase is result.own
    assert seen["lay"].run_dir == str(root)  # tune gives each phase its run folder
    # The phase's launches run under the job's options.
    phase = seen["launch"].__self__
    assert (phase.command, phase.job_dir, phase.stall_timeout_s, phase.gather,
            phase.require_same_program) == ("tune:collect", rr.job_dir / "collect", 900.0, "kv",
                                             True)
    rep = json.loads((rr.job_dir / "collect" / "rank-1.json").read_text())
    assert (rep["command"], rep["rank"]["host"]) == ("collect", "node-a")


def test_a_phase_rank_without_rank_0s_job_report_gives_up_at_the_gather_timeout(tmp_path):
    rr = _rank_run(tmp_path, 1, gather_timeout_s=0.2)
    rr.command = "tune"
    with returns_within(15), pytest.raises(PgleError) as err:
        rr.phase({}, "collect", _phase_workflow({}), None, str(tmp_path / "root"))
    assert err.value.message == (f"rank 0 wrote no job report {rr.job_dir / 'collect' / 'job.json'}"
                                 " within --gather-timeout 0.2 s.")


def test_the_watchdog_passes_on_the_fleets_stop_and_the_exit_names_the_divergence(tmp_path):
    """--require-same-program reaches the rank's fleet; with no peer failed, the watchdog
    returns what the fleet's poll says (rank 0's divergence.json there: stop), and the exit
    record then names this rank itself as the one it stopped for."""
    from pgle.errors import EXIT_NOT_VERIFIED

    rr = _rank_run(tmp_path, 1, world=2, require_same_program=True)
    assert rr.forensics is not None and rr.forensics.require_same_program is True
    plain = _rank_run(tmp_path / "plain", 1, world=2)
    assert plain.forensics is not None and plain.forensics.require_same_program is False
    jd = rr.job_dir
    (jd / "fleet").mkdir()
    (jd / "fleet" / "divergence.json").write_text('{"divergence": []}\n')
    rr.forensics.attach(tmp_path / "rank-1-run")
    plain.forensics.attach(tmp_path / "plain-run")
    assert plain.watchdog()() is None  # the job goes on without the option
    assert rr.watchdog()() == EXIT_NOT_VERIFIED
    assert rr.forensics.stopped_for_divergence and rr.stopped_for is None
    rr.mark_exit(EXIT_NOT_VERIFIED)
    assert json.loads((jd / "rank-1.exit").read_text())["stopped_for"] == 1
    plain.mark_exit(0)
    assert json.loads((plain.job_dir / "rank-1.exit").read_text())["stopped_for"] is None


def test_a_rank_without_a_fleet_has_a_watchdog_for_peers_only(tmp_path):
    rr = _rank_run(tmp_path, 1, world=2)
    rr.forensics = None
    assert rr.watchdog()() is None
    rr.mark_exit(0)
    assert json.loads((rr.job_dir / "rank-1.exit").read_text())["stopped_for"] is None


def test_a_rank_rewrites_its_start_record_on_a_second_start(tmp_path):
    """The first start claims the rank's record; a second (the hook called again) rewrites
    it, never claims it twice (which would say another process holds the rank)."""
    rr = _rank_run(tmp_path, 1, world=2)
    rr.mark_started()
    first = json.loads((rr.job_dir / "rank-1.start").read_text())
    rr.mark_started()
    again = json.loads((rr.job_dir / "rank-1.start").read_text())
    assert first["rank"] == again["rank"] == 1 and rr.claimed is True


def test_a_warning_every_rank_gave_is_said_once_without_its_ranks(tmp_path):
    rr = _rank_run(tmp_path, 0, world=2)
    _report(rr.job_dir, 1, warnings=["disk slow", "only mine"])
    with returns_within(10):
        out = _job_report(rr, Report("run", "applied", workload_exit_code=0,
                                     warnings=["disk slow"]))
    assert out.warnings == ["disk slow", "rank 1: only mine"]


def test_a_phase_rank_waits_the_whole_gather_timeout_polling_at_a_bounded_rate(tmp_path):
    rr = _rank_run(tmp_path, 1, gather_timeout_s=2.0)
    began, cpu = time.monotonic(), time.thread_time()
    with returns_within(15), pytest.raises(PgleError, match="wrote no job report"):
        rr.wait_for_job_report()
    assert time.monotonic() - began >= 2.0  # never given up before the timeout
    assert time.thread_time() - cpu < 0.3  # a growing interval: no busy loop
