"""One rank's launches and what `driver.run` passes on from the job's options, in process on
real job folders with real workload processes (issue 37).

The end-to-end tests run ranks as `python -m pgle` subprocesses and take tens of seconds each;
these call pgle.jobs.driver directly with a small workflow whose body launches a real workload
through the rank's `launch` hook: the start record stamped at the launch and the exit record
written the moment the workload exits, the hold under `--gather kv` and its bound in the spec
the harness reads, the stall watchdog's bound and the phase a stalled rank publishes,
`--require-same-program` stopping a rank of a diverged job, the fleet's last read after a short
run, and a rank stopped for a peer whose workload left no stacks. Also what rank 0's combine
step is given, the phase job rank 0 keeps, and the log lines rank 0 prints itself.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from helpers.deadline import returns_within
from helpers.pgle_testing import marked_steps_script
from pgle.errors import EXIT_NOT_VERIFIED, BadInput, Stalled
from pgle.evidence import schema
from pgle.jobs import driver, fleet, kv, ranks
from pgle.jobs.layout import JobOptions, LayoutRequest, OutputRequest
from pgle.launch import childenv
from pgle.launch.runfolder import RunFolder
from pgle.launch.workload import Workload
from pgle.report import Report
from pgle.verdicts.across_ranks import JobReports, combine_verdicts


def _env(rank: int, world: int = 2) -> dict[str, str]:
    """This process's environment as one rank of a job (the launchers' variables out;
    PGLE_MUTATION_RUN, the mutation run's, stays)."""
    ours = ("PGLE_RANK", "PGLE_WORLD_SIZE", "PGLE_LOCAL_RANK", "PGLE_JOB_ID")
    env = {k: v for k, v in os.environ.items()
           if k not in ours and not k.startswith(("XLA_", "JAX_", "TF_CPP_", "SLURM_", "OMPI_",
                                                  "PMI_"))}
    return {**env, "JAX_PLATFORMS": "cpu", "PGLE_RANK": str(rank), "PGLE_WORLD_SIZE": str(world),
            "PGLE_JOB_ID": "e37"}


def _launching(tmp_path: Path, seen: dict[str, Any], workload: Workload,
               after=None, **launch_kw: Any) -> driver.Workflow:
    """A workflow whose body launches `workload` once in the rank's run folder (`launch_kw`:
    the command's own options of the launch); `after(lay)` runs in the body right after the
    launch returned, before the rank's report exists."""

    def body(opts: Any, lay: Any, launch: Any, env: dict[str, str]) -> Report:
        run = RunFolder.create("run", lay.run_dir)
        seen["run"] = Path(run.path)
        seen["before_launch"] = time.time()
        ex = launch(workload, run, childenv.build(env), **launch_kw)
        seen["code"] = ex.result.exit_code
        if after is not None:
            after(lay)
        return Report("run", "applied", workload_exit_code=ex.result.exit_code)

    def request(opts: Any) -> LayoutRequest:
        return LayoutRequest(run_dir=str(tmp_path / "r%r"))

    return driver.Workflow("run", request, body, lambda o, lay, job: combine_verdicts(job))


def _script(tmp_path: Path, text: str) -> Workload:
    path = tmp_path / "w.py"
    path.write_text(text)
    return Workload(str(path), None, ())


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_the_start_record_is_stamped_at_the_launch_and_the_exit_recorded_as_it_exits(tmp_path):
    """The claim before the body is not the start: the record is written again when the
    workload starts; its exit (and, failed, `failed/`) are on disk before the launch returns,
    where the peers look, not only once the rank's report is built."""
    jd = tmp_path / "job"
    seen: dict[str, Any] = {}

    def after(lay):
        seen["exit"] = _json(jd / "rank-1.exit")
        seen["failed"] = (jd / "failed" / "rank-1").is_file()

    script = _script(tmp_path, "import sys\nprint('failing')\nsys.exit(3)\n")
    # The command's own options reach the launch too (here --log's copy of the output).
    wf = _launching(tmp_path, seen, script, after, log_copy=str(tmp_path / "copy.log"))
    with returns_within(30):
        out = driver.run(wf, None, JobOptions(job_dir=str(jd)), environ=_env(1))
    assert seen["code"] == 3 and out.workload_exit_code == 3
    assert "failing" in (tmp_path / "copy.log").read_text()
    assert _json(jd / "rank-1.start")["time"] >= seen["before_launch"]
    assert (seen["exit"]["exit_code"], seen["exit"]["stopped_for"]) == (3, None)
    assert seen["failed"] is True


@pytest.mark.parametrize("gather", ["folder", "kv"])
def test_under_gather_kv_the_workload_is_held_up_to_the_gather_timeout_and_5_minutes(
        tmp_path, gather):
    """What the harness reads (spec.json): hold only under --gather kv, for the gather
    timeout and 300 s more. A rank that nobody stopped publishes no stall phase."""
    jd = tmp_path / "job"
    seen: dict[str, Any] = {}
    wf = _launching(tmp_path, seen, _script(tmp_path, "print('done')\n"))
    with returns_within(30):
        out = driver.run(wf, None, JobOptions(job_dir=str(jd), gather_timeout=7, gather=gather),
                         environ=_env(1))
    spec = _json(seen["run"] / "spec.json")
    assert (spec["hold"], spec["hold_timeout_s"]) == (gather == "kv", 307.0)
    assert out.exit_code == 0 and seen["code"] == 0
    assert not (jd / fleet.FLEET_DIR / "rank-1.stall.json").exists()


def test_a_stalled_rank_is_stopped_at_the_jobs_bound_and_publishes_its_phase(tmp_path):
    """--stall-timeout reaches the rank's launch; before pgle stops the workload, the rank
    publishes the phase its stacks show, for rank 0's first-stopped-rank line."""
    jd = tmp_path / "job"
    (jd / fleet.FLEET_DIR).mkdir(parents=True)
    # Rank 0's phase is there already: the stalled rank does not wait for its peers'.
    (jd / fleet.FLEET_DIR / "rank-0.stall.json").write_text(
        json.dumps({"rank": 0, "phase": "collective", "what": "x", "own": False}))
    wf = _launching(tmp_path, {}, _script(tmp_path, "import time\ntime.sleep(60)\n"))
    with returns_within(20), pytest.raises(Stalled):
        driver.run(wf, None, JobOptions(job_dir=str(jd), gather_timeout=0, stall_timeout=1),
                   environ=_env(1))
    stall = _json(jd / fleet.FLEET_DIR / "rank-1.stall.json")
    assert (stall["rank"], stall["own"]) == (1, True)
    assert stall["phase"] is not None
    assert _json(jd / "rank-1.json")["exit_code"] == Stalled.exit_code


def test_require_same_program_stops_a_rank_of_a_diverged_job(tmp_path):
    """--require-same-program reaches the rank's fleet: rank 0 found the ranks' programs differ
    (divergence.json), so this rank stops its workload and names itself in its exit record."""
    jd = tmp_path / "job"
    (jd / fleet.FLEET_DIR).mkdir(parents=True)
    (jd / fleet.FLEET_DIR / fleet.DIVERGENCE).write_text('{"divergence": []}')
    seen: dict[str, Any] = {}
    wf = _launching(tmp_path, seen, _script(tmp_path, "import time\ntime.sleep(60)\n"))
    with returns_within(20):
        driver.run(wf, None, JobOptions(job_dir=str(jd), require_same_program=True),
                   environ=_env(1))
    assert seen["code"] == EXIT_NOT_VERIFIED
    assert _json(jd / "rank-1.exit")["stopped_for"] == 1


def test_a_short_run_s_last_steps_reach_the_fleet_after_it_exits(tmp_path):
    """The harness writes a short run's steps out at its exit, after the fleet's last poll:
    the rank reads them once more, so rank 0 sees how far it got."""
    jd = tmp_path / "job"
    seen: dict[str, Any] = {}

    def after(lay):
        seen["fleet"] = _json(jd / fleet.FLEET_DIR / "rank-1.json")

    wf = _launching(tmp_path, seen, _script(tmp_path, marked_steps_script(3, 4)), after)
    with returns_within(45):
        driver.run(wf, None, JobOptions(job_dir=str(jd)), environ=_env(1))
    assert seen["code"] == 0
    assert seen["fleet"]["rank"] == 1 and seen["fleet"]["steps"] == 3, seen["fleet"]


def test_a_rank_stopped_for_a_peer_whose_workload_left_no_stacks_publishes_no_phase(tmp_path):
    """A command workload (no harness, no stacks file) stopped because rank 0 failed: its stall
    record says it was stopped for a peer, with no phase."""
    jd = tmp_path / "job"
    (jd / "failed").mkdir(parents=True)
    (jd / "failed" / "rank-0").write_text(json.dumps({"exit_code": 5, "time": 1.0}))
    seen: dict[str, Any] = {}
    sleep = Workload(None, None, ("60",), command=("sleep", "60"))
    wf = _launching(tmp_path, seen, sleep)
    with returns_within(45):
        out = driver.run(wf, None, JobOptions(job_dir=str(jd)), environ=_env(1))
    assert _json(jd / fleet.FLEET_DIR / "rank-1.stall.json") == {
        "rank": 1, "phase": None, "what": None, "own": False}
    assert _json(jd / "rank-1.exit")["stopped_for"] == 0
    assert "; stopped: rank 0's workload failed with code 5; " in out.summary[0]


# -- --gather kv with a real held workload: one JAX process, its own jax.distributed service --

_DISTRIBUTED = """
import socket, sys
import jax
from jax._src import distributed

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1,
                           process_id=0)
if len(sys.argv) > 1:  # rank 0's part, set in the store ahead of this rank's fetch
    with open(sys.argv[1], "rb") as f:
        distributed.global_state.client.key_value_set_bytes("pgle/run/job", f.read())
"""


def _held_run(tmp_path: Path, seen: dict[str, Any], *args: str,
              profile: Path | None = None) -> driver.Workflow:
    """A rank that collects into `-o merged.pb`: its workload joins its own jax.distributed
    service (one process) and is held at its end; on rank 0, combine writes the merged
    profile."""
    script = tmp_path / "dist.py"
    script.write_text(_DISTRIBUTED)

    def body(opts: Any, lay: Any, launch: Any, env: dict[str, str]) -> Report:
        run = RunFolder.create("collect", lay.run_dir)
        seen["run"] = Path(run.path)
        ex = launch(Workload(str(script), None, args), run, childenv.build(env))
        seen["held"] = ex.held
        return Report("collect", "collected", workload_exit_code=ex.result.exit_code)

    def combine(opts: Any, lay: Any, job: JobReports) -> Report:
        out = combine_verdicts(job)
        if profile is not None:
            profile.write_bytes(b"MERGED")
            out.profile = {"path": str(profile)}
        return out

    def request(opts: Any) -> LayoutRequest:
        return LayoutRequest(run_dir=str(tmp_path / "r%r"),
                             output=OutputRequest(str(tmp_path / "merged.pb")))

    return driver.Workflow("run", request, body, combine)


def test_a_held_rank_takes_the_jobs_report_and_merged_profile_from_the_store(tmp_path):
    """Rank 1's workload waits at its end; through it the rank sends its files and takes rank
    0's: the job report into its own job folder, the merged profile to its own -o."""
    jd = tmp_path / "job"
    job = kv.bundle(Path("/r0/job"), {"job.json": b'{"status": "partial"}',
                                      "profile/merged.pb": b"MERGED"},
                    extra={"profile": "/r0/merged.pb", "profile_kind": "file"})
    (tmp_path / "job.bundle").write_bytes(job)
    seen: dict[str, Any] = {}
    wf = _held_run(tmp_path, seen, str(tmp_path / "job.bundle"))
    with returns_within(45):
        out = driver.run(wf, None, JobOptions(job_dir=str(jd), gather_timeout=5, gather="kv"),
                         environ=_env(1))
    assert seen["held"] is True and out.exit_code == 0, out.warnings
    assert _json(jd / "job.json") == {"status": "partial"}
    assert (tmp_path / "merged.pb").read_bytes() == b"MERGED"


def test_held_rank_0_sends_the_job_report_and_the_profile_it_merged(tmp_path):
    """Rank 0 waits for rank 1's files up to the gather timeout (none come), builds the job
    report, then publishes it with the profile it merged itself, and lets its workload end."""
    jd = tmp_path / "job"
    seen: dict[str, Any] = {}
    wf = _held_run(tmp_path, seen, profile=tmp_path / "merged.pb")
    with returns_within(45):
        out = driver.run(wf, None, JobOptions(job_dir=str(jd), gather_timeout=0.5, gather="kv"),
                         environ=_env(0))
    assert seen["held"] is True
    assert [m["rank"] for m in out.details["job"]["missing"]] == [1]
    handoff = seen["run"] / schema.HANDOFF_DIR
    requests = [_json(handoff / f"request-{n}.json") for n in (0, 1)]
    assert [r["final"] for r in requests] == [False, True]
    assert not (handoff / "request-2.json").exists()
    with kv.Bundle(Path(requests[1]["publish"]["pgle/run/job"])) as b:
        assert [m[0] for m in b.members] == ["job.json", "profile/merged.pb"]
        assert b.extra["profile"] == str(tmp_path / "merged.pb")


# -- what driver.run passes on, without a launch ----------------------------------------------


def _quiet(seen: dict[str, Any], request: LayoutRequest | None = None,
           combine=None, profile: dict | None = None) -> driver.Workflow:
    """A workflow that launches nothing: its body records what it was given."""

    def body(opts: Any, lay: Any, launch: Any, env: dict[str, str]) -> Report:
        seen.update(lay=lay, env=env)
        return Report("run", "applied", workload_exit_code=0)

    def combining(opts: Any, lay: Any, job: JobReports) -> Report:
        seen["job"] = job
        out = combine_verdicts(job) if combine is None else combine(job)
        out.profile = profile
        return out

    return driver.Workflow("run", lambda o: request or LayoutRequest(), body, combining)


def test_gather_kv_reaches_rank_0_which_names_the_workload_that_could_not_send(tmp_path):
    jd = tmp_path / "job"
    with returns_within(15):
        out = driver.run(_quiet({}), None, JobOptions(job_dir=str(jd), gather_timeout=0,
                                                       gather="kv"), environ=_env(0))
    assert any("rank 0's workload did not wait at its end with a jax.distributed client" in w
               for w in out.warnings), out.warnings
    assert out.details["job"]["missing"] == [{
        "rank": 1, "why": "never started (--gather kv: its files never came through "
                          "jax.distributed's key-value store)"}]


def test_a_shared_job_folder_needs_no_key_value_store(tmp_path):
    jd = tmp_path / "job"
    seen: dict[str, Any] = {}
    with returns_within(15):
        out = driver.run(_quiet(seen), None, JobOptions(job_dir=str(jd), gather_timeout=0),
                         environ=_env(0))
    assert out.warnings == []
    # The rank's layout is the job's: its default run folder inside the job folder.
    assert seen["lay"].job_dir == jd and seen["lay"].run_dir == str(jd / "rank-0")
    assert seen["lay"].n_selected == 2


def test_a_ranks_log_without_its_rank_is_refused_in_a_job(tmp_path):
    with returns_within(15), pytest.raises(BadInput) as err:
        driver.run(_quiet({}, LayoutRequest(log="same.log")), None,
                   JobOptions(job_dir=str(tmp_path / "job"), gather_timeout=0), environ=_env(0))
    assert "has no rank placeholder" in err.value.message


def test_the_job_folder_template_takes_the_jobs_id(tmp_path):
    with returns_within(15):
        out = driver.run(_quiet({}), None, JobOptions(job_dir=str(tmp_path / "job-%j"),
                                                       gather_timeout=0), environ=_env(0))
    assert out.details["job"]["dir"] == str(tmp_path / "job-e37")
    assert (tmp_path / "job-e37" / "job.json").is_file()


def test_rank_0_that_merges_a_profile_still_builds_its_job_report(tmp_path):
    jd = tmp_path / "job"
    merged = tmp_path / "merged.pb"
    seen: dict[str, Any] = {}
    request = LayoutRequest(output=OutputRequest(str(merged)))
    with returns_within(15):
        out = driver.run(_quiet(seen, request, profile={"path": str(merged)}), None,
                         JobOptions(job_dir=str(jd), gather_timeout=0), environ=_env(0))
    assert seen["lay"].output is not None
    assert out.profile == {"path": str(merged)}
    assert _json(jd / "job.json")["profile"] == {"path": str(merged)}


def test_rank_0s_combine_step_is_given_the_phases_command_and_every_ranks_part(tmp_path):
    """A tune phase's job (command `tune:run`): combine gets `run`, the world size, rank 0's
    own report and the rank that never reported; rank 0 keeps the phase's job report as it
    built it (not re-read from job.json)."""
    jd = tmp_path / "job"
    seen: dict[str, Any] = {}

    def combine(job: JobReports) -> Report:
        return Report("run", "applied", details={"by_rank": {0: "here"}})

    def phases(opts: Any, lay: Any, phase: Any, env: dict[str, str]) -> Report:
        seen["outer_env"] = env
        seen["result"] = phase("run", _quiet(seen, combine=combine), None,
                               str(tmp_path / "root"))
        return Report("tune", "done")

    environ = _env(0)
    wf = driver.Workflow("tune", lambda o: LayoutRequest(), phases, None)
    with returns_within(15):
        driver.run(wf, None, JobOptions(job_dir=str(jd), gather_timeout=0), environ=environ)
    job = seen["job"]
    assert (job.command, job.world_size, sorted(job.reports)) == ("run", 2, [0])
    assert dict(job.missing) == {1: "never started"}
    assert seen["result"].job["by_rank"] == {0: "here"}
    assert seen["outer_env"] == environ and seen["env"] == environ


def test_one_process_runs_a_phase_with_its_own_rank_info(tmp_path):
    environ = {"HOME": str(tmp_path)}
    seen: dict[str, Any] = {}

    def phases(opts: Any, lay: Any, phase: Any, env: dict[str, str]) -> Report:
        phase("collect", _quiet(seen, LayoutRequest(log=str(tmp_path / "l%r.log"))), None,
              str(tmp_path / "root"))
        return Report("tune", "done")

    driver.run(driver.Workflow("tune", lambda o: LayoutRequest(), phases, None), None,
               environ=environ)
    assert seen["lay"].info == ranks.detect(environ)
    assert seen["lay"].log == str(tmp_path / "l0.log")


def test_rank_0_prints_its_own_log_lines(tmp_path, caplog):
    """Only the other ranks turn pgle's log records into their report's notices."""
    info = ranks.RankInfo(rank=0, world_size=2, job_id="j", step_id=None, source="env")
    rr = driver.RankRun("run", info, tmp_path / "job", 0.0)
    log = logging.getLogger("pgle.commands.run")

    def body(o, lay, launch, env):
        log.warning("slow disk")
        return Report("run", "applied", workload_exit_code=0)

    wf = driver.Workflow("run", lambda o: LayoutRequest(), body,
                         lambda o, lay, job: combine_verdicts(job))
    with caplog.at_level(logging.INFO, logger="pgle"), returns_within(15):
        rr.run(wf, None, {})
    assert "slow disk" in caplog.text
    assert rr.notices == [] and "notices" not in _json(rr.job_dir / "rank-0.json")
