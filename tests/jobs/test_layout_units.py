"""A job's options, paths and its ranks' files, in process (issue 37).

`--stall-timeout` and the `--gather*` options as the driver takes them, every path of one rank
(`layout.resolve`: run folder, log, --ranks, collect's output plan), what rank 0 says of a rank
that never reported (`folder.describe_missing` on real files), and the sentence naming the rank
that stopped first. Each assertion is what a user reads or what a rank writes where.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pgle.errors import BadInput
from pgle.jobs import first_stopped, folder, layout
from pgle.jobs.layout import JobOptions, LayoutRequest, OutputRequest
from pgle.jobs.ranks import RankInfo
from pgle.launch.stall import REPORT_AFTER_S, StallPolicy


@pytest.mark.parametrize("value, seconds", [
    (None, None), ("auto", None), (" AUTO ", None), ("", None),
    ("off", 0.0), ("OFF", 0.0), ("0", 0.0), ("none", 0.0), ("no", 0.0),
    (90, 90.0), (0, 0.0), (2.5, 2.5), ("90", 90.0), ("0.5", 0.5), (" 90s ", 90.0),
    ("30m", 1800.0), ("2h", 7200.0), ("1h30m", 5400.0),
])
def test_stall_timeout_values(value, seconds):
    got = layout.parse_stall_timeout(value)
    assert got == seconds and type(got) is type(seconds)


@pytest.mark.parametrize("value, message", [
    (-1, "--stall-timeout -1 is negative."),
    (-0.5, "--stall-timeout -0.5 is negative."),
    ("-5", "--stall-timeout '-5': a duration >= 0, e.g. 30m."),
    ("inf", "--stall-timeout 'inf': a duration >= 0, e.g. 30m."),
    ("nan", "--stall-timeout 'nan': a duration >= 0, e.g. 30m."),
    ("soon", "--stall-timeout 'soon' is not a duration."),
    ("report:0", "--stall-timeout 'report:0': report after a duration above 0."),
    ("report:0s", "--stall-timeout 'report:0s': report after a duration above 0."),
    ("report:-3", "--stall-timeout 'report:-3': a duration >= 0, e.g. 30m."),
    ("report:", "--stall-timeout '' is not a duration."),
])
def test_bad_stall_timeouts_say_so_in_one_sentence(value, message):
    with pytest.raises(BadInput) as err:
        layout.parse_stall_timeout(value)
    assert err.value.message == message


def test_report_mode_and_a_given_policy():
    policy = layout.parse_stall_timeout(" Report : 90s ")
    assert policy == StallPolicy(None, 90.0, rhythm_stop=False)
    assert layout.parse_stall_timeout("report") == StallPolicy(None, REPORT_AFTER_S,
                                                               rhythm_stop=False)
    assert layout.parse_stall_timeout("report:45") == StallPolicy(None, 45.0, rhythm_stop=False)
    given = StallPolicy(10.0, None)
    assert layout.parse_stall_timeout(given) is given
    # `True` is no duration: it is read as the text "true".
    with pytest.raises(BadInput, match="'true' is not a duration"):
        layout.parse_stall_timeout(True)


def test_job_options_are_checked_when_made():
    opts = JobOptions()
    assert (opts.gather_timeout_s, opts.stall_timeout_s, opts.gather) == (600.0, None, "folder")
    assert JobOptions(gather_timeout=0).gather_timeout_s == 0.0
    assert JobOptions(gather_timeout=7).gather_timeout_s == 7.0
    assert JobOptions(stall_timeout="30m").stall_timeout_s == 1800.0
    assert JobOptions(stall_timeout="off").stall_timeout_s == 0.0
    assert JobOptions(gather="kv", job_dir="/scratch/j-%j").gather == "kv"
    for kwargs, message in [
        ({"gather_timeout": -1}, "--gather-timeout -1 is negative."),
        ({"gather": "nfs"}, "--gather 'nfs': use one of folder, kv."),
        ({"gather": "kv", "job_dir": "gs://bucket/j"},
         "--gather kv keeps each rank's job folder local: drop the URL --job-dir, or drop "
         "--gather kv."),
        ({"job_dir": "j-%q"}, "unknown placeholder %q in output path 'j-%q'."),
        ({"stall_timeout": "-2"}, "--stall-timeout '-2': a duration >= 0, e.g. 30m."),
    ]:
        with pytest.raises(BadInput) as err:
            JobOptions(**kwargs)
        assert err.value.message == message
    assert JobOptions(gather="folder", job_dir="gs://bucket/j").job_dir == "gs://bucket/j"


def _info(rank: int, world: int = 4) -> RankInfo:
    return RankInfo(rank=rank, world_size=world, job_id="j9", source="pgle")


def test_a_ranks_paths_in_a_job(tmp_path):
    jd = tmp_path / "job"
    lay = layout.resolve(LayoutRequest(log="logs/r%r.log", inputs={"p": "in/%r-of-%n.pb",
                                                                   "none": None}), _info(2), jd)
    assert (lay.run_dir, lay.log, lay.rank, lay.world_size) == (str(jd / "rank-2"),
                                                                "logs/r2.log", 2, 4)
    assert lay.input("p") == "in/2-of-4.pb" and lay.inputs["none"] is None
    with pytest.raises(BadInput, match="^none is required but was not given.$"):
        lay.input("none")
    with pytest.raises(BadInput, match="^q is required but was not given.$"):
        lay.input("q")
    assert (lay.selected, lay.n_selected, lay.output) == (True, 4, None)
    assert not lay.writes_shared
    assert layout.resolve(LayoutRequest(), _info(0), jd).writes_shared
    with pytest.raises(RuntimeError, match="no output plan"):
        lay.plan
    # --run-dir wins over a workflow's run root; a run root over the job folder's.
    assert layout.resolve(LayoutRequest(run_dir="r-{rank}", run_root="/x"), _info(3), jd).run_dir \
        == "r-3"
    assert layout.resolve(LayoutRequest(run_root="/x"), _info(3), jd).run_dir == "/x"
    assert layout.resolve(LayoutRequest(run_root=""), _info(3), jd).run_dir == ""


def test_per_rank_outputs_need_a_rank_placeholder_in_a_job(tmp_path):
    jd = tmp_path / "job"
    for option, request, suggestion in [
        ("--run-dir", LayoutRequest(run_dir="runs/out"), "runs/out-%r"),
        ("--log", LayoutRequest(log="run.log"), "run-%r.log"),
        ("--log", LayoutRequest(log="logs.d/"), "logs.d-%r"),
        ("--log", LayoutRequest(log=".log"), ".log-%r"),
        ("--log", LayoutRequest(log="a.b/log"), "a.b/log-%r"),
        ("--log", LayoutRequest(log="run.1.log"), "run.1-%r.log"),
        ("--run-dir", LayoutRequest(run_dir="OUTX/"), "OUTX-%r"),
    ]:
        with pytest.raises(BadInput) as err:
            layout.resolve(request, _info(1), jd)
        template = request.run_dir or request.log
        assert err.value.message == (f"{option} {template} has no rank placeholder: all 4 ranks "
                                  "would write the same path.")
        assert err.value.hint == f"Add %r (the rank), e.g. {suggestion}."
    # %l repeats on every node: not a rank placeholder.
    with pytest.raises(BadInput, match="no rank placeholder"):
        layout.resolve(LayoutRequest(log="l%l.log"), _info(1), jd)
    # One process: any path, placeholders filled with rank 0.
    one = layout.resolve(LayoutRequest(run_dir="runs/out", log="l%r.log"), RankInfo(), None)
    assert (one.run_dir, one.log, one.job_dir, one.n_selected) == ("runs/out", "l0.log", None, 1)


def test_selected_ranks(tmp_path):
    jd = tmp_path / "job"
    lay = layout.resolve(LayoutRequest(selected_ranks=(0, 3)), _info(3), jd)
    assert (lay.selected, lay.n_selected) == (True, 2)
    lay = layout.resolve(LayoutRequest(selected_ranks=(0, 3)), _info(1), jd)
    assert (lay.selected, lay.n_selected) == (False, 2)
    with pytest.raises(BadInput) as err:
        layout.resolve(LayoutRequest(selected_ranks=(1, 4)), _info(1), jd)
    assert err.value.message == "--ranks 1,4: this job has ranks 0 to 3 only."
    # One process: rank 0 of 1.
    lay = layout.resolve(LayoutRequest(selected_ranks=(0,)), RankInfo(), None)
    assert (lay.selected, lay.n_selected) == (True, 1)
    lay = layout.resolve(LayoutRequest(selected_ranks=(0, 2)), _info(2, world=3), None)
    assert (lay.selected, lay.n_selected) == (True, 1)


def _plan(req: OutputRequest, info: RankInfo, jd: Path | None) -> layout.OutputPlan:
    return layout.resolve(LayoutRequest(output=req), info, jd).plan


def test_output_plans_of_one_process():
    one = RankInfo()
    assert _plan(OutputRequest("p%r.pb"), one, None) == \
        layout.OutputPlan("per_rank", True, "p0.pb", None, None)
    assert _plan(OutputRequest(None, default="here.pb"), one, None) == \
        layout.OutputPlan("per_rank", True, "here.pb", None, None)
    assert _plan(OutputRequest(None), one, None) == \
        layout.OutputPlan("per_rank", True, None, None, None)
    assert _plan(OutputRequest("p.pb", only_rank=0), one, None) == \
        layout.OutputPlan("one_rank", True, "p.pb", None, 0)
    for only in (1, -1):
        with pytest.raises(BadInput) as err:
            _plan(OutputRequest("p.pb", only_rank=only), one, None)
        assert err.value.message == f"--rank {only} is not a rank of this job (ranks 0 to 0)."


def test_output_plans_in_a_job(tmp_path):
    jd = tmp_path / "job"
    prof = jd / "profiles"
    assert _plan(OutputRequest("p.pb", only_rank=3), _info(3), jd) == \
        layout.OutputPlan("one_rank", True, "p.pb", None, 3)
    assert _plan(OutputRequest("p.pb", only_rank=3), _info(0), jd) == \
        layout.OutputPlan("one_rank", False, None, None, 3)
    assert _plan(OutputRequest("out/{rank}.pbtxt"), _info(1), jd) == \
        layout.OutputPlan("per_rank", True, "out/1.pbtxt", None, None)
    assert _plan(OutputRequest("merged.pbtxt"), _info(1), jd) == \
        layout.OutputPlan("merge", True, str(prof / "rank-1.pbtxt"), "merged.pbtxt", None,
                          merges_here=False)
    assert _plan(OutputRequest("merged.pb"), _info(0), jd) == \
        layout.OutputPlan("merge", True, str(prof / "rank-0.pb"), "merged.pb", None,
                          merges_here=True)
    # No -o: rank 0 merges into the job folder.
    assert _plan(OutputRequest(None), _info(0), jd) == \
        layout.OutputPlan("merge", True, str(prof / "rank-0.pb"), str(jd / "profile.pb"), None,
                          merges_here=True)
    # --per-module: a directory per rank, merged into -o or the job folder.
    assert _plan(OutputRequest("mods", per_module=True), _info(2), jd) == \
        layout.OutputPlan("merge", True, str(prof / "rank-2"), "mods", None)
    assert _plan(OutputRequest(None, per_module=True), _info(0), jd) == \
        layout.OutputPlan("merge", True, str(prof / "rank-0"), str(prof / "merged"), None,
                          merges_here=True)
    with pytest.raises(BadInput, match="^--rank 4 is not a rank of this job \\(ranks 0 to 3\\).$"):
        _plan(OutputRequest("p.pb", only_rank=4), _info(0), jd)
    with pytest.raises(BadInput, match="xml"):  # the profile's own format error, before launch
        _plan(OutputRequest("merged.xml"), _info(0), jd)


# -- what rank 0 says of ranks that never reported -------------------------------------------


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_describe_missing_names_what_each_rank_got_to(tmp_path):
    jd = tmp_path / "job"
    jd.mkdir()
    _write(jd / "rank-1.start", {"host": "n1", "pid": 41})
    _write(jd / "rank-2.start", {"host": "n2", "pid": 42})
    _write(jd / "rank-2.exit", {"exit_code": 3, "host": "n2"})
    _write(jd / "rank-3.exit", {"exit_code": -9, "host": "n3", "stopped_for": {"rank": 2}})
    _write(jd / "rank-4.json", {"status": "ok", "exit_code": 0})
    (jd / "rank-5.json").write_text("{oops")
    _write(jd / "rank-6.exit", {"exit_code": 0, "host": "n6", "stopped_for": None})
    (jd / "rank-7.exit").write_text("[")
    (jd / "rank-8.start").write_text("]")
    _write(jd / "rank-9.json", {"status": "ok", "exit_code": 999})
    _write(jd / "rank-10.exit", {"exit_code": 1, "host": "h", "stopped_for": {"rank": 0}})
    got = folder.describe_missing(jd, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert got == {
        0: "never started",
        1: "started on n1 (pid 41); its workload has not exited",
        2: "workload exited with code 3 on n2; no report",
        3: "workload exited with code -9 on n3 (stopped because rank {'rank': 2} failed); "
           "no report",
        4: "report appeared after the timeout",
        5: got[5],
        6: "workload exited with code 0 on n6; no report",
        7: "workload exited; no report",
        8: "started; its workload has not exited",
        9: "report unreadable: exit_code 999 is not an exit code",
        10: "workload exited with code 1 on h (stopped because rank {'rank': 0} failed); "
            "no report",
    }
    assert got[5].startswith("report unreadable: the report is not JSON (")
    assert folder.describe_missing(tmp_path / "absent", [1]) == {1: "never started"}
    assert folder.describe_missing(jd, []) == {}


def test_describe_missing_of_a_link_says_why_in_words(tmp_path):
    jd = tmp_path / "job"
    jd.mkdir()
    _write(tmp_path / "elsewhere.json", {"status": "ok", "exit_code": 0})
    (jd / "rank-1.json").symlink_to(tmp_path / "elsewhere.json")
    why = folder.describe_missing(jd, [1])[1]
    assert why.startswith("report unreadable: ") and "Errno" not in why and "link" in why


def test_the_first_stopped_rank_in_a_sentence():
    found = first_stopped.first_stopped({
        0: first_stopped.RankProgress(10, 100.0, "collective", "in an all-reduce"),
        1: first_stopped.RankProgress(9, 200.0, "compile", "compiling jit_step"),
        2: first_stopped.RankProgress(10, 50.0, "barrier", "at a barrier"),
        3: first_stopped.RankProgress(9, 150.0, None, None),
    })
    assert found["first_rank"] == 3 and found["waiting"] == [0, 2]
    assert found["ranks"][1] == {"rank": 1, "steps": 9, "last_progress": 200.0,
                                 "phase": "compile"}
    assert first_stopped.line(found) == \
        "rank 3 stopped progressing first (after 9 steps); ranks 0, 2 waited for it in a " \
        "collective"
    found = first_stopped.first_stopped({
        4: first_stopped.RankProgress(2, 1.23456, "fdo_profile_wait", "waiting for the profile"),
        5: first_stopped.RankProgress(2, 1.0, "collective", "in an all-gather")})
    assert (found["first_rank"], found["waiting"]) == (5, [4])
    assert found["ranks"][0]["last_progress"] == 1.235
    assert first_stopped.line(found) == \
        "rank 5 stopped progressing first (after 2 steps): in an all-gather; rank 4 waited for " \
        "it in a collective"
    # A tie in steps and clock: the lower rank.
    found = first_stopped.first_stopped({7: first_stopped.RankProgress(1, 5.0),
                                         6: first_stopped.RankProgress(1, 5.0)})
    assert found["first_rank"] == 6 and first_stopped.line(found) == \
        "rank 6 stopped progressing first (after 1 steps)"
    assert first_stopped.first_stopped({}) is None
    assert math.isclose(first_stopped.first_stopped(
        {0: first_stopped.RankProgress(0, 0.0004)})["ranks"][0]["last_progress"], 0.0)


def test_open_mpis_job_id_names_the_job_folder():
    from pgle.jobs.ranks import detect

    ompi = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}
    assert detect({**ompi, "PMIX_NAMESPACE": " prterun-host-1234@1 "}).job_id == \
        "prterun-host-1234@1"
    assert detect({**ompi, "OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.0.0.1:4000"}).job_id \
        == "1531576320"
    assert detect({**ompi, "OMPI_MCA_orte_hnp_uri": "77;tcp://h"}).job_id == "77"
    assert detect({**ompi, "OMPI_MCA_orte_hnp_uri": "5.0.1;tcp://h"}).job_id == "5"
    assert detect({**ompi, "OMPI_MCA_orte_hnp_uri": "78;tcp://10.0.0.1;tcp://10.0.0.2"}).job_id \
        == "78"
    assert detect({**ompi, "OMPI_MCA_orte_hnp_uri": ";tcp://h"}).job_id is None
    assert detect({**ompi, "OMPI_MCA_orte_hnp_uri": ".5;tcp://h"}).job_id is None
    assert detect({**ompi, "PMIX_NAMESPACE": "ns", "OMPI_MCA_orte_hnp_uri": "9.0;x"}).job_id == \
        "ns"
    assert detect({**ompi, "PMIX_NAMESPACE": " "}).job_id is None
    # Inside a SLURM allocation the scheduler's job names the launch.
    inside = detect({**ompi, "PMIX_NAMESPACE": "ns", "SLURM_JOB_ID": "55", "SLURM_STEP_ID": "3"})
    assert (inside.job_id, inside.step_id, inside.job_key) == ("55", "3", "55.3")
    assert detect({**ompi, "SLURM_STEP_ID": "3"}).step_id is None


def test_the_watchdog_sees_a_peers_failure_at_once_and_keeps_it(tmp_path):
    check = folder.watchdog(tmp_path, 0)
    assert check() is None
    (tmp_path / "failed").mkdir()
    (tmp_path / "failed" / "rank-2").write_text(json.dumps({"exit_code": 4, "time": 1.0}))
    assert check() == (2, 4)  # the very next poll: no interval unless asked for one
    (tmp_path / "failed" / "rank-2").unlink()
    assert check() == (2, 4)


def test_a_report_only_stall_timeout_of_one_second_is_accepted():
    # issue 37: "above 0" is the rule, not "above 1".
    from pgle.jobs.layout import parse_stall_timeout

    policy = parse_stall_timeout("report:1")
    assert (policy.stop_after_s, policy.report_after_s, policy.rhythm_stop) == (None, 1.0, False)
