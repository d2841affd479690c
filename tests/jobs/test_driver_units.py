"""The job driver's decisions, in process on real job folders (issue 37).

The driver's end-to-end tests run ranks as subprocesses; these call pgle.jobs.driver directly:
rank 0's job report (which ranks reported, each rank's row, the exit code and the sentence that
says why), the one line another rank prints, a phase rank waiting for rank 0's job report,
and `--gather kv`'s exchange through a real (ended) workload process's handoff folder.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from helpers.deadline import returns_within
from pgle.errors import PgleError
from pgle.evidence import schema
from pgle.jobs import driver, folder, kv
from pgle.jobs.layout import LayoutRequest, OutputPlan, RankLayout
from pgle.jobs.ranks import RankInfo
from pgle.report import Report
from pgle.verdicts.across_ranks import combine_verdicts


def _rank_run(tmp_path: Path, rank: int, world: int = 3, **kw) -> driver.RankRun:
    info = RankInfo(rank=rank, world_size=world, job_id="j5", step_id="2", source="slurm")
    jd = tmp_path / "job"
    jd.mkdir(parents=True, exist_ok=True)
    return driver.RankRun("run", info, jd, kw.pop("gather_timeout_s", 0.0), host="node-a", **kw)


def _report(jd: Path, rank: int, **fields) -> None:
    data = {"command": "run", "status": "applied", "exit_code": 0, "modules": [],
            "rank": {"rank": rank, "host": f"h{rank}"}, **fields}
    (jd / f"rank-{rank}.json").write_text(json.dumps(data))


def _job_report(rr: driver.RankRun, own: Report) -> Report:
    """Rank 0's job report, its own report written first as RankRun._run writes it."""
    folder.write_report(rr.job_dir, rr.rank, own)
    return rr.job_report(own, combine_verdicts)


def _failed(jd: Path, rank: int, code: int, at: float) -> None:
    (jd / "failed").mkdir(parents=True, exist_ok=True)
    (jd / "failed" / f"rank-{rank}").write_text(json.dumps({"exit_code": code, "time": at}))


def test_rank_0s_job_report_names_every_rank_and_the_missing(tmp_path):
    rr = _rank_run(tmp_path, 0, gather_timeout_s=0.0)
    jd = rr.job_dir
    _report(jd, 1, run_dir="/r1", log_path="/r1/log", workload_exit_code=0,
            warnings=["slow disk"])
    (jd / "rank-2.start").write_text(json.dumps({"host": "h2", "pid": 9}))
    own = Report("run", "applied", workload_exit_code=0, warnings=["slow disk"])
    out = _job_report(rr, own)
    job = out.details["job"]
    assert job == {"dir": str(jd), "id": "j5.2", "world_size": 3, "source": "slurm",
                   "reported": [0, 1],
                   "missing": [{"rank": 2,
                                "why": "started on h2 (pid 9); its workload has not exited"}],
                   "gather_timeout_s": 0.0, "report": str(jd / "job.json")}
    assert out.run_dir == str(jd)
    rows = out.details["ranks"]
    assert [r["rank"] for r in rows] == [0, 1]
    assert rows[1] == {"rank": 1, "status": "applied", "exit_code": 0, "workload_exit_code": 0,
                       "host": "h1", "run_dir": "/r1", "log_path": "/r1/log",
                       "stopped_for": None, "report": str(jd / "rank-1.json")}
    assert rows[0]["host"] is None and rows[0]["report"] == str(jd / "rank-0.json")
    assert out.summary[-3:] == [
        f"2 of 3 ranks reported (job folder {jd})",
        "rank 2 never reported: started on h2 (pid 9); its workload has not exited",
        "rank 2 never reported within --gather-timeout 0 s: the job verdict covers the other "
        "ranks only"]
    assert out.exit_code == 1
    assert out.reasons[-1] == ("rank 2 never reported within --gather-timeout 0 s: the job "
                               "verdict covers the other ranks only.")
    assert json.loads((jd / "job.json").read_text()) == json.loads(out.to_json())
    assert out.warnings == ["ranks 0-1: slow disk"]  # one warning of two ranks, once


def test_a_workload_failure_decides_the_job_exit_code(tmp_path):
    rr = _rank_run(tmp_path, 0, world=4)
    jd = rr.job_dir
    _report(jd, 1, exit_code=7, workload_exit_code=7)
    _report(jd, 2, exit_code=9, workload_exit_code=9, stopped_for={"rank": 1, "exit_code": 7})
    _report(jd, 3, exit_code=9, workload_exit_code=9, stopped_for={"rank": 1, "exit_code": 7})
    _failed(jd, 1, 7, at=10.0)
    _failed(jd, 3, 9, at=11.0)
    out = _job_report(rr, Report("run", "applied", workload_exit_code=0))
    assert (out.exit_code, out.workload_exit_code) == (7, 7)
    text = "rank 1 failed first, with exit code 7; pgle stopped the workload on ranks 2-3"
    assert out.reasons[-1] == text + "." and out.summary[-1] == text
    # Rank 0's own failure file counts too (rank -1 is nobody's).
    _failed(jd, 0, 4, at=1.0)
    out = _job_report(rr, Report("run", "applied", workload_exit_code=0))
    assert out.exit_code == 4 and out.summary[-1].startswith("rank 0 failed first, with exit "
                                                             "code 4; pgle stopped")


def test_a_pgle_error_on_a_rank_decides_the_job_exit_code(tmp_path):
    rr = _rank_run(tmp_path, 0, world=4)
    jd = rr.job_dir
    _report(jd, 1, status="error", exit_code=0, pgle_error="zero exit: not counted")
    _report(jd, 2, status="error", exit_code=2, pgle_error="bad profile")
    _report(jd, 3, status="error", exit_code=5, pgle_error="other")
    out = _job_report(rr, Report("run", "applied", workload_exit_code=0))
    assert out.exit_code == 2
    text = "pgle failed on ranks 2-3 (rank 2: exit 2)"
    assert out.reasons[-1] == text + "." and out.summary[-1] == text
    # No failure, no error, nobody missing: the workflow's own exit code and sentences.
    for r in (1, 2, 3):
        _report(jd, r)
    out = _job_report(rr, Report("run", "applied", workload_exit_code=0))
    assert out.exit_code == 0 and out.summary[-1] == f"4 of 4 ranks reported (job folder {jd})"


def test_under_gather_kv_a_missing_rank_says_its_files_never_came(tmp_path):
    rr = _rank_run(tmp_path, 0, world=2, gather="kv", gather_timeout_s=50.0)
    rr.kv_errors.append("fetch pgle/run/rank-1: nothing arrived")
    with returns_within(10):  # the exchange waited already: no second wait of 50 s here
        out = _job_report(rr, Report("run", "applied", workload_exit_code=0))
    assert out.details["job"]["missing"] == [{"rank": 1, "why": (
        "never started (--gather kv: its files never came through jax.distributed's key-value "
        "store)")}]
    assert "fetch pgle/run/rank-1: nothing arrived" in out.warnings
    assert out.summary[-1].startswith("rank 1 never reported within --gather-timeout 50 s")


def test_the_one_line_another_rank_prints(tmp_path):
    rr = _rank_run(tmp_path, 2, world=4)
    rep = Report("run", "partial", exit_code=0, workload_exit_code=0,
                 modules=[{"status": "applied"}, {"status": "partial"}, {"status": "applied"}])
    path = rr.job_dir / "rank-2.json"
    assert rr.summary_line(rep) == \
        f"rank 2 of 4: partial (2 applied, 1 partial); exit 0; report {path}"
    rep = Report("run", "error", exit_code=3, workload_exit_code=3)
    assert rr.summary_line(rep) == \
        f"rank 2 of 4: error; workload exited with code 3; exit 3; report {path}"
    rr.stopped_for = folder.PeerFailure(1, 7)
    assert rr.summary_line(rep) == (f"rank 2 of 4: error; stopped: rank 1's workload failed "
                                    f"with code 7; exit 3; report {path}")


def test_a_ranks_report_describes_itself(tmp_path):
    rr = _rank_run(tmp_path, 1, world=2)
    rr.notices.append("running: w.py")
    rep = Report("run", "applied", modules=[{"module": "a"}, {"module": "b", "rank": 5}])
    rr.annotate(rep)
    assert rep.details["rank"] == {**rr.info.to_dict(), "host": "node-a"}
    assert rep.details["notices"] == ["running: w.py"]
    assert [m["rank"] for m in rep.modules] == [1, 5]
    assert "stopped_for" not in rep.details and rep.reasons == []
    rr.stopped_for = folder.PeerFailure(0, 6)
    rr.annotate(rep)
    rr.annotate(rep)  # twice: one sentence
    assert rep.details["stopped_for"] == {"rank": 0, "exit_code": 6}
    assert rep.reasons == ["pgle stopped this rank's workload: rank 0's workload failed with "
                           "code 6"]
    quiet = _rank_run(tmp_path, 1, world=2)
    plain = Report("run", "applied")
    quiet.annotate(plain)
    assert "notices" not in plain.details


def test_a_rank_marks_its_exit_once_and_names_whom_it_stopped_for(tmp_path):
    rr = _rank_run(tmp_path, 1, world=2)
    rr.stopped_for = folder.PeerFailure(0, 6)
    rr.mark_exit(9)
    rr.mark_exit(0)  # the second is ignored
    data = json.loads((rr.job_dir / "rank-1.exit").read_text())
    assert (data["exit_code"], data["stopped_for"]) == (9, 0)
    # A rank that failed on its own tells its peers.
    other = _rank_run(tmp_path / "b", 1, world=2)
    other.mark_exit(3)
    assert folder.peer_failure(other.job_dir, 0) == (1, 3)
    assert json.loads((other.job_dir / "rank-1.exit").read_text())["stopped_for"] is None


def test_a_rank_that_fails_in_pgle_leaves_its_error_report(tmp_path):
    rr = _rank_run(tmp_path, 1, world=2)
    rr._record_failure(2, "profile p.pb does not exist.")
    rep = json.loads((rr.job_dir / "rank-1.json").read_text())
    assert (rep["command"], rep["status"], rep["exit_code"], rep["pgle_error"]) == \
        ("run", "error", 2, "profile p.pb does not exist.")
    assert rep["reasons"] == ["pgle failed on rank 1: profile p.pb does not exist."]
    assert rep["rank"]["host"] == "node-a"
    assert folder.peer_failure(rr.job_dir, 0) == (1, 2)
    (tmp_path / "a-file").write_text("")
    nowhere = driver.RankRun("run", rr.info, tmp_path / "a-file" / "job")
    nowhere._write_job_error(2, "x")  # nowhere to write it: the error at hand is what matters
    tune = driver.RankRun("tune:collect", rr.info, rr.job_dir)
    tune._write_job_error(4, "merge failed")
    job = json.loads((rr.job_dir / "job.json").read_text())
    assert (job["command"], job["exit_code"], job["reasons"], job["pgle_error"]) == \
        ("collect", 4, ["rank 0 could not build the job report: merge failed"], "merge failed")


def test_a_phase_rank_reads_rank_0s_job_report(tmp_path):
    rr = _rank_run(tmp_path, 1, world=2, gather_timeout_s=0.0)
    jd = rr.job_dir
    (jd / "job.json").write_text('{"status": "applied"}')
    assert rr.wait_for_job_report() == {"status": "applied"}
    (jd / "job.json").write_text("[1]")
    with pytest.raises(PgleError) as err:
        rr.wait_for_job_report()
    assert err.value.message == f"job report {jd / 'job.json'} is not a JSON object."
    (jd / "job.json").write_text("{nope")
    with pytest.raises(PgleError) as err:
        rr.wait_for_job_report()
    assert err.value.message.startswith(f"job report {jd / 'job.json'} is not JSON (")
    assert err.value.message.endswith(").")
    (jd / "job.json").unlink()
    (jd / "job.json").mkdir()
    with pytest.raises(PgleError) as err:
        rr.wait_for_job_report()
    assert err.value.message.startswith(f"job report {jd / 'job.json'}: ")
    (jd / "job.json").rmdir()
    with returns_within(10), pytest.raises(PgleError) as err:  # a timeout of 0 s: at once
        rr.wait_for_job_report()
    assert err.value.message == (f"rank 0 wrote no job report {jd / 'job.json'} within "
                                 "--gather-timeout 0 s.")
    # Rank 0 failed and said why: no wait for the timeout.
    rr.gather_timeout_s = 600.0
    _failed(jd, 0, 2, at=1.0)
    _report(jd, 0, status="error", exit_code=2, pgle_error="bad --profile")
    with pytest.raises(PgleError) as err:
        rr.wait_for_job_report()
    assert err.value.message == "rank 0 failed, so there is no job report: bad --profile"


def test_a_phase_rank_waits_out_the_timeout_when_rank_0_failed_without_a_reason(tmp_path):
    rr = _rank_run(tmp_path, 1, world=2, gather_timeout_s=0.2)
    _failed(rr.job_dir, 0, 2, at=1.0)
    with returns_within(10), pytest.raises(PgleError, match="wrote no job report"):
        rr.wait_for_job_report()
    (rr.job_dir / "rank-0.json").write_text("{bad")
    with returns_within(10), pytest.raises(PgleError, match="wrote no job report"):
        rr.wait_for_job_report()


def _phases_report(phases: dict) -> Report:
    rep = Report("tune", "applied", exit_code=0)
    rep.details["phases"] = phases
    return rep


def test_after_phases_rank_0_names_the_job_folders_and_another_rank_its_last_phase(tmp_path):
    rr = _rank_run(tmp_path, 0, world=2)
    rep = _phases_report({"collect": {}, "run": {}})
    out = rr._finish_phases(rep)
    assert out.details["job"] == {"dir": str(rr.job_dir), "world_size": 2,
                                  "phases": {"collect": str(rr.job_dir / "collect"),
                                             "run": str(rr.job_dir / "run")}}
    assert out.summary == []
    plain = Report("tune", "applied")
    assert rr._finish_phases(plain).details["job"]["phases"] == {}
    rep = _phases_report({})
    rep.details["step_times"] = {"median": 1}
    assert rr._finish_phases(rep).summary == [
        f"step times are rank 0's; every rank's are in {rr.job_dir}/run/"]
    other = _rank_run(tmp_path, 1, world=2)
    rep = _phases_report({})
    assert other._finish_phases(rep) is rep  # no phase ran
    other.last_phase = Report("run", "partial", exit_code=3, summary=["rank 1 of 2: partial"])
    quiet = other._finish_phases(rep)
    assert quiet.summary == ["tune: rank 1 of 2: partial"] and quiet.exit_code == 3
    assert quiet.to_dict()["command"] == "tune" and quiet.to_dict()["exit_code"] == 3
    failed = Report("tune", "error", exit_code=2)
    other.last_phase = Report("collect", "collected", exit_code=0)
    quiet = other._finish_phases(failed)
    assert quiet.summary == ["tune: rank 1: collected"] and quiet.exit_code == 2
    assert quiet.to_dict()["exit_code"] == 2 and quiet.to_dict()["status"] == "collected"


def test_a_quiet_report_keeps_the_full_one(tmp_path):
    rep = Report("run", "partial", exit_code=3, workload_exit_code=3, profile={"path": "p"},
                 log_path="l", trace_dir="t", run_dir="r", modules=[{"m": 1}], reasons=["why"],
                 warnings=["w"], summary=["a", "b"])
    quiet = driver.QuietReport.of(rep, "one line")
    assert (quiet.command, quiet.status, quiet.exit_code, quiet.workload_exit_code) == \
        ("run", "partial", 3, 3)
    assert (quiet.profile, quiet.log_path, quiet.trace_dir, quiet.run_dir) == \
        ({"path": "p"}, "l", "t", "r")
    assert (quiet.modules, quiet.reasons, quiet.summary, quiet.warnings) == \
        ([{"m": 1}], ["why"], ["one line"], [])
    assert quiet.to_dict() == json.loads(rep.to_json())


def test_the_profile_rank_0_wrote_itself(tmp_path):
    info = RankInfo(rank=0, world_size=2, job_id="j")

    def lay(plan):
        return RankLayout(info, tmp_path, None, None, {}, plan)

    with_profile = Report("collect", "collected", profile={"path": "x"})
    merge = OutputPlan("merge", True, "r0.pb", "out/m.pb", None, merges_here=True)
    assert driver._written_here(lay(merge), with_profile) == str(Path("out/m.pb").absolute())
    assert driver._written_here(lay(merge), Report("collect", "collected")) is None
    assert driver._written_here(lay(merge), Report("c", "s", profile={"path": ""})) is None
    assert driver._written_here(lay(None), with_profile) is None
    elsewhere = OutputPlan("merge", True, "r0.pb", "out/m.pb", None, merges_here=False)
    assert driver._written_here(lay(elsewhere), with_profile) is None
    one = OutputPlan("one_rank", True, "mine.pb", None, 0)
    assert driver._written_here(lay(one), with_profile) == str(Path("mine.pb").absolute())
    assert driver._written_here(lay(OutputPlan("one_rank", False, None, None, 1)),
                                with_profile) is None
    assert driver._written_here(lay(OutputPlan("per_rank", True, "p0.pb", None, None)),
                                with_profile) is None


def test_one_process_runs_the_body_with_the_plain_layout(tmp_path):
    from pgle.jobs.layout import JobOptions

    seen = {}
    opts, environ = object(), {"HOME": "/h"}

    def body(o, lay, launch, env):
        seen.update(opts=o, lay=lay, launch=launch, env=env)
        return Report("run", "applied")

    def request(o):
        seen["requested"] = o
        return LayoutRequest(log="l%r.log")

    wf = driver.Workflow("run", request, body, lambda *a: Report("run", "x"))
    out = driver.run(wf, opts, JobOptions(stall_timeout="30m"), environ=environ)
    assert out.status == "applied" and seen["lay"].log == "l0.log"
    assert seen["opts"] is opts and seen["requested"] is opts and seen["env"] == environ
    assert seen["launch"].keywords == {"stall_timeout": 1800.0}
    assert driver.run(wf, opts, environ=environ) and seen["launch"].keywords == \
        {"stall_timeout": None}
    sub_opts = object()

    def phases(o, lay, phase, env):
        assert o is opts and env == environ and lay.run_dir is None
        sub = driver.Workflow("collect", lambda so: LayoutRequest(), body, lambda *a: None)
        result = phase("collect", sub, sub_opts, str(tmp_path / "phase-root"))
        assert result.job == result.own.to_dict()
        return Report("tune", "done", details={"ran": seen["lay"].run_dir})

    out = driver.run(driver.Workflow("tune", lambda o: LayoutRequest(), phases, None), opts,
                     environ=environ)
    assert out.details["ran"] == str(tmp_path / "phase-root")
    assert seen["opts"] is sub_opts and seen["env"] == environ and seen["lay"] is not None


def test_a_non_leaders_log_records_become_its_notices(tmp_path):
    import logging

    rr = _rank_run(tmp_path, 1, world=2)
    log = logging.getLogger("pgle.commands.run")

    def body(o, lay, launch, env):
        log.info("running: w.py")
        log.warning("slow disk")
        log.error("it broke")
        return Report("run", "applied", workload_exit_code=0)

    wf = driver.Workflow("run", lambda o: LayoutRequest(), body, lambda *a: Report("run", "x"))
    rr.run(wf, None, {})
    rep = json.loads((rr.job_dir / "rank-1.json").read_text())
    assert rep["notices"] == ["running: w.py", "warning: slow disk", "warning: it broke"]


# -- --gather kv, through a real ended workload's handoff folder -------------------------------


def _at_once(test):
    """An exchange test: its workload has ended, so every round returns at once. One that
    waits for an answer (a round's timeout and 30 s) fails in 10 s instead of reading as a
    timeout in a mutation run."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        with returns_within(10):
            return test(*args, **kwargs)

    return run


def _held(tmp_path: Path) -> types.SimpleNamespace:
    """An execution whose workload process ended (so no round waits): `resume` is recorded."""
    run = tmp_path / "run"
    (run / schema.HANDOFF_DIR).mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    ex = types.SimpleNamespace(run=types.SimpleNamespace(path=str(run)), resumed=0,
                               result=types.SimpleNamespace(pending=types.SimpleNamespace(
                                   child=child)), interrupted=False)
    ex.resume = lambda: setattr(ex, "resumed", ex.resumed + 1)
    return ex


def _answer(ex, n: int, fetched: dict[str, bytes], errors=()) -> dict[str, str]:
    folder_ = Path(ex.run.path) / schema.HANDOFF_DIR
    (folder_ / "pgle").mkdir(exist_ok=True)
    where = {}
    for i, (key, data) in enumerate(fetched.items()):
        where[key] = str(folder_ / "pgle" / f"{n}-{i}.in")
        Path(where[key]).write_bytes(data)
    (folder_ / f"answer-{n}.json").write_text(json.dumps({"fetched": where,
                                                          "errors": list(errors)}))
    return where


@_at_once
def test_rank_0_that_cannot_write_a_ranks_files_says_why_in_the_systems_words(tmp_path):
    rr = _rank_run(tmp_path, 0, world=2, gather="kv", gather_timeout_s=5.0)
    rr.held = ex = _held(tmp_path)
    (rr.job_dir / "rank-1.json").mkdir()  # where the rank's report goes: a folder
    good = kv.bundle(Path("/r1/job"), {"rank-1.json": b'{"status": "ok", "exit_code": 0}'})
    _answer(ex, 0, {"pgle/run/rank-1": good})
    rr._kv_send(None)
    assert rr.kv_errors == ["rank 1: unreadable bundle (it is a directory)"]  # the reason only


@_at_once
def test_release_goes_on_with_the_exchange_of_the_held_workload(tmp_path):
    """The workload's exchange goes on where it was (its next round is the final one), never
    restarted at round 0 over its first request; a workload held with no exchange yet gets
    one; either way the workload is resumed once and nothing stays held."""
    rr = _rank_run(tmp_path, 0, world=2, gather="kv", gather_timeout_s=5.0)
    rr.held = ex = _held(tmp_path)
    _answer(ex, 0, {})
    rr._kv_send(None)  # round 0
    assert rr.exchange is not None and rr.exchange.execution is ex
    rr._release()
    handoff = Path(ex.run.path) / schema.HANDOFF_DIR
    assert json.loads((handoff / "request-0.json").read_text())["final"] is False
    assert json.loads((handoff / "request-1.json").read_text())["final"] is True
    assert (rr.held, rr.exchange, ex.resumed) == (None, None, 1)
    fresh = _rank_run(tmp_path / "b", 1, world=2, gather="kv")
    fresh.held = ex2 = _held(tmp_path / "b")
    fresh._release()
    request = json.loads((Path(ex2.run.path) / schema.HANDOFF_DIR / "request-0.json").read_text())
    assert request["final"] is True and ex2.resumed == 1 and fresh.held is None


def test_without_a_held_workload_no_file_travels(tmp_path):
    rr = _rank_run(tmp_path, 1, world=2, gather="kv")
    rr._kv_send(None)
    assert rr.kv_errors == [
        "--gather kv: rank 1's workload did not wait at its end with a jax.distributed client "
        "(it failed first, or never called jax.distributed.initialize()), so its files could "
        "not travel"]
    rr._release()  # nothing held: nothing to do
    rr._kv_publish_job()  # not rank 0


@_at_once
def test_rank_0_takes_every_ranks_bundle(tmp_path):
    rr = _rank_run(tmp_path, 0, world=3, gather="kv", gather_timeout_s=5.0)
    rr.held = ex = _held(tmp_path)
    good = kv.bundle(Path("/r1/job"), {"rank-1.json": b'{"status": "ok", "exit_code": 0}'})
    _answer(ex, 0, {"pgle/run/rank-1": good, "pgle/run/rank-2": b"garbage"})
    rr._kv_send(None)
    request = json.loads((Path(ex.run.path) / schema.HANDOFF_DIR / "request-0.json").read_text())
    assert [f["key"] for f in request["fetch"]] == ["pgle/run/rank-1", "pgle/run/rank-2"]
    assert request["publish"] == {} and request["final"] is False
    assert request["timeout_s"] == 5.0
    assert json.loads((rr.job_dir / "rank-1.json").read_text())["status"] == "ok"
    assert rr.kv_errors == ["rank 2: unreadable bundle (not a pgle bundle)"]
    assert rr.exchange is not None and not rr.exchange.done
    # Rank 0 then publishes the job report (no profile) and lets the workload go.
    (rr.job_dir / "job.json").write_text('{"status": "applied"}')
    rr._kv_publish_job()
    request = json.loads((Path(ex.run.path) / schema.HANDOFF_DIR / "request-1.json").read_text())
    assert list(request["publish"]) == ["pgle/run/job"] and request["final"] is True
    assert request["timeout_s"] == 30.0
    with kv.Bundle(Path(request["publish"]["pgle/run/job"])) as b:
        assert [m[0] for m in b.members] == ["job.json"]
    assert rr.kv_errors[-1].startswith("the workload's process ended before answering")
    rr._kv_publish_job()  # done: not twice
    assert not (Path(ex.run.path) / schema.HANDOFF_DIR / "request-2.json").exists()
    rr._release()
    assert ex.resumed == 1 and rr.held is None and rr.exchange is None


@_at_once
def test_rank_0_without_job_json_still_ends_the_exchange(tmp_path):
    rr = _rank_run(tmp_path, 0, world=2, gather="kv")
    rr.held = ex = _held(tmp_path)
    rr.exchange = kv.HeldExchange(ex)
    rr._kv_publish_job()
    request = json.loads((Path(ex.run.path) / schema.HANDOFF_DIR / "request-0.json").read_text())
    assert request["publish"] == {} and request["final"] is True


@_at_once
def test_another_rank_sends_its_files_and_keeps_the_job_report(tmp_path):
    rr = _rank_run(tmp_path, 2, world=3, gather="kv", gather_timeout_s=7.0)
    rr.held = ex = _held(tmp_path)
    (rr.job_dir / "rank-2.json").write_text('{"status": "applied", "exit_code": 0}')
    (rr.job_dir / "rank-1.json").write_text("{}")  # not this rank's
    job = kv.bundle(Path("/r0/job"), {"job.json": b'{"status": "partial"}',
                                      "profile/m.pb": b"MERGED"},
                    extra={"profile": "/r0/out/m.pb", "profile_kind": "file"})
    _answer(ex, 0, {"pgle/run/job": job})
    own = tmp_path / "mine" / "m.pb"
    plan = OutputPlan("merge", True, "x", str(own), None)
    lay = RankLayout(rr.info, rr.job_dir, None, None, {}, plan)
    rr._kv_send(lay)
    request = json.loads((Path(ex.run.path) / schema.HANDOFF_DIR / "request-0.json").read_text())
    assert list(request["publish"]) == ["pgle/run/rank-2"]
    assert [f["key"] for f in request["fetch"]] == ["pgle/run/job"]
    assert request["final"] is True and request["timeout_s"] == 7.0
    with kv.Bundle(Path(request["publish"]["pgle/run/rank-2"])) as b:
        assert [m[0] for m in b.members] == ["rank-2.json"]
    assert json.loads((rr.job_dir / "job.json").read_text()) == {"status": "partial"}
    assert own.read_bytes() == b"MERGED"
    assert rr.kv_errors == []
    # A job bundle that does not parse is one warning.
    rr2 = _rank_run(tmp_path / "b", 1, world=2, gather="kv")
    rr2.held = ex2 = _held(tmp_path / "b")
    _answer(ex2, 0, {"pgle/run/job": b"junk"})
    rr2._kv_send(None)
    assert rr2.kv_errors == ["rank 0's job files: unreadable bundle (not a pgle bundle)"]
    # One that cannot be kept (a folder where job.json goes): the system's reason only.
    rr3 = _rank_run(tmp_path / "c", 1, world=2, gather="kv")
    rr3.held = ex3 = _held(tmp_path / "c")
    (rr3.job_dir / "job.json").mkdir()
    _answer(ex3, 0, {"pgle/run/job": kv.bundle(Path("/r0/job"), {"job.json": b"{}"})})
    rr3._kv_send(None)
    assert rr3.kv_errors == ["rank 0's job files: unreadable bundle (it is a directory)"]


# -- one rank of a real `pgle run` (pgle.api, in process; the workload a real process) ---------


def _rank_env(rank: int, world: int = 2) -> dict[str, str]:
    import os

    # The launchers' variables out (PGLE_MUTATION_RUN, the mutation run's, stays).
    ranks = ("PGLE_RANK", "PGLE_WORLD_SIZE", "PGLE_LOCAL_RANK", "PGLE_JOB_ID")
    env = {k: v for k, v in os.environ.items()
           if k not in ranks and not k.startswith(("XLA_", "JAX_", "TF_CPP_", "SLURM_", "OMPI_",
                                                   "PMI_"))}
    return {**env, "JAX_PLATFORMS": "cpu", "PGLE_RANK": str(rank), "PGLE_WORLD_SIZE": str(world),
            "PGLE_JOB_ID": "api"}


def _profile(tmp_path: Path) -> str:
    from pgle.profiles.files import Profile, write_profile

    write_profile(Profile(costs=[("fusion.1", 1.0)]), tmp_path / "p.pb")
    return str(tmp_path / "p.pb")


def test_a_rank_records_its_start_exit_and_report_around_a_real_workload(tmp_path):
    from pgle import api

    script = tmp_path / "w.py"
    script.write_text("print('working')\n")
    jd = tmp_path / "job"
    out = api.run(str(script), profile=_profile(tmp_path), job_dir=str(jd),
                  run_dir=str(tmp_path / "r%r"), environ=_rank_env(1))
    assert isinstance(out, driver.QuietReport)
    assert out.summary[0].startswith("rank 1 of 2: ") and \
        out.summary[0].endswith(f"; exit {out.exit_code}; report {jd / 'rank-1.json'}")
    start = json.loads((jd / "rank-1.start").read_text())
    assert start["rank"] == 1 and start["world_size"] == 2
    exit_ = json.loads((jd / "rank-1.exit").read_text())
    assert (exit_["exit_code"], exit_["stopped_for"]) == (0, None)
    rep = json.loads((jd / "rank-1.json").read_text())
    assert rep["rank"]["rank"] == 1 and rep["run_dir"] == str(tmp_path / "r1")
    assert not (jd / "failed" / "rank-1").exists()
    assert (tmp_path / "r1").is_dir()


def test_a_rank_stops_its_workload_when_a_peer_failed(tmp_path):
    from pgle import api

    script = tmp_path / "w.py"
    script.write_text("import time\ntime.sleep(120)\n")
    jd = tmp_path / "job"
    _failed(jd, 0, 5, at=1.0)  # rank 0's workload failed with 5
    with returns_within(60):  # the workload sleeps 120 s: only the watchdog ends it sooner
        out = api.run(str(script), profile=_profile(tmp_path), job_dir=str(jd),
                      run_dir=str(tmp_path / "r%r"), environ=_rank_env(1))
    rep = json.loads((jd / "rank-1.json").read_text())
    assert rep["stopped_for"] == {"rank": 0, "exit_code": 5}
    assert "pgle stopped this rank's workload: rank 0's workload failed with code 5" in \
        rep["reasons"]
    assert json.loads((jd / "rank-1.exit").read_text())["stopped_for"] == 0
    assert "; stopped: rank 0's workload failed with code 5; " in out.summary[0]


def test_a_phase_rank_without_rank_0s_job_report_fails_in_one_sentence(tmp_path):
    from pgle import api

    script = tmp_path / "w.py"
    script.write_text("print('x')\n")
    jd = tmp_path / "job"
    # Not the 600 s default, and under a mutation run's wall-clock limit (a wait that never
    # ends fails here instead of reading as a timeout).
    with returns_within(25), pytest.raises(PgleError) as err:
        api.tune(str(script), job_dir=str(jd), gather_timeout=0, run_dir=str(tmp_path / "t%r"),
                 environ=_rank_env(1))
    assert err.value.message.startswith(f"rank 0 wrote no job report {jd / 'collect' / 'job.json'}")
    # The phase ran as a job of its own, in its own folder.
    assert json.loads((jd / "collect" / "rank-1.json").read_text())["command"] == "collect"


def test_after_a_stall_rank_0s_job_report_names_the_rank_that_stopped_first(tmp_path):
    from pgle.errors import Stalled

    rr = _rank_run(tmp_path, 0, world=2)
    rr.command = "tune:run"
    jd = rr.job_dir
    _report(jd, 1, exit_code=Stalled.exit_code, workload_exit_code=Stalled.exit_code,
            warnings=["w1"])
    (jd / "fleet").mkdir()
    for r, steps, phase in ((0, 5, "collective"), (1, 3, "user_code")):
        (jd / "fleet" / f"rank-{r}.json").write_text(json.dumps(
            {"rank": r, "steps": steps, "last_progress": 10.0 + r}))
        (jd / "fleet" / f"rank-{r}.stall.json").write_text(json.dumps(
            {"rank": r, "phase": phase, "what": f"what {r}"}))
    with returns_within(10):  # every phase is there: no wait for the peers' phases
        out = _job_report(rr, Report("run", "applied", workload_exit_code=0))
    assert out.command == "run"  # the phase's own command, not tune:run
    assert out.details["stall"]["first_rank"] == 1
    assert "rank 1 stopped progressing first (after 3 steps): what 1; rank 0 waited for it in " \
        "a collective" in out.summary
    assert out.warnings == ["rank 1: w1"]
    # Not stalled: no stall section even with stall files there.
    _report(jd, 1)
    with returns_within(10):
        assert "stall" not in _job_report(rr, Report("run", "applied")).details


# -- issue 37: what travels under --gather kv, and what stays ---------------------------------


@_at_once
def test_rank_0_sends_the_profile_it_wrote_with_its_mode(tmp_path):
    rr = _rank_run(tmp_path, 0, world=2, gather="kv")
    rr.held = ex = _held(tmp_path)
    rr.exchange = kv.HeldExchange(ex)
    rr.kv_errors.append("an earlier warning")
    (rr.job_dir / "job.json").write_text('{"status": "applied"}')
    profile = tmp_path / "out" / "merged.pb"
    profile.parent.mkdir()
    profile.write_bytes(b"MERGED")
    profile.chmod(0o600)
    rr.own_profile = str(profile)
    rr._kv_publish_job()
    request = json.loads((Path(ex.run.path) / schema.HANDOFF_DIR / "request-0.json").read_text())
    with kv.Bundle(Path(request["publish"]["pgle/run/job"])) as b:
        assert b.job_dir == str(rr.job_dir)
        assert (b.extra["profile"], b.extra["profile_kind"]) == (str(profile), "file")
        assert [m[0] for m in b.members] == ["job.json", "profile/merged.pb"]
        assert dict((m[0], m[2]) for m in b.members)["profile/merged.pb"] == 0o600
    # The round's own warning comes after the earlier ones.
    assert rr.kv_errors[0] == "an earlier warning" and len(rr.kv_errors) == 2


def test_only_rank_0_with_an_open_exchange_publishes_the_job(tmp_path):
    rr = _rank_run(tmp_path, 0, world=2, gather="kv")
    rr._kv_publish_job()  # nothing held, no exchange: nothing to do, no error
    other = _rank_run(tmp_path / "b", 1, world=2, gather="kv")
    other.held = ex = _held(tmp_path / "b")
    other.exchange = kv.HeldExchange(ex)
    (other.job_dir / "job.json").write_text("{}")
    other._kv_publish_job()
    assert not (Path(ex.run.path) / schema.HANDOFF_DIR / "request-0.json").exists()


@_at_once
def test_another_rank_sends_its_files_with_their_modes_and_keeps_earlier_warnings(tmp_path):
    rr = _rank_run(tmp_path, 1, world=2, gather="kv")
    rr.held = ex = _held(tmp_path)
    rr.kv_errors.append("an earlier warning")
    (rr.job_dir / "rank-1.json").write_text('{"status": "applied", "exit_code": 0}')
    (rr.job_dir / "rank-1.json").chmod(0o600)
    _answer(ex, 0, {}, errors=["fetch pgle/run/job: nothing arrived"])
    rr._kv_send(None)
    request = json.loads((Path(ex.run.path) / schema.HANDOFF_DIR / "request-0.json").read_text())
    with kv.Bundle(Path(request["publish"]["pgle/run/rank-1"])) as b:
        assert b.job_dir == str(rr.job_dir)
        assert [(m[0], m[2]) for m in b.members] == [("rank-1.json", 0o600)]
    assert rr.kv_errors == ["an earlier warning", "fetch pgle/run/job: nothing arrived"]


@_at_once
def test_rank_0_says_why_it_could_not_keep_a_ranks_bundle(tmp_path):
    rr = _rank_run(tmp_path, 0, world=2, gather="kv")
    rr.held = ex = _held(tmp_path)
    rr.kv_errors.append("an earlier warning")
    (rr.job_dir / "rank-1.json").mkdir()  # something in the way of rank 1's report
    good = kv.bundle(Path("/r1/job"), {"rank-1.json": b'{"status": "ok", "exit_code": 0}'})
    _answer(ex, 0, {"pgle/run/rank-1": good})
    rr._kv_send(None)
    assert rr.kv_errors == ["an earlier warning", "rank 1: unreadable bundle (it is a directory)"]
