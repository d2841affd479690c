"""`pgle estimate`'s pure parts: XLA's statistics lines, the scheduled module, the simulator,
what-if rules and the missing-plugin line (real files, real subprocesses; no GPU, no plugin)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgle.errors import BadInput
from pgle.estimate import costs, prediction, replay, xla_stats
from pgle.profiles import files
from pgle.xla import hlo_text
from pgle.xla.hlo_text import Instruction

DATA = Path(__file__).resolve().parents[1] / "data" / "estimate"
REPO = Path(__file__).resolve().parents[2]


def test_statistics_of_a_real_log():
    stats = xla_stats.parse((DATA / "pgle.log").read_text())
    assert len(stats) == 1
    s = stats[0].to_dict()
    assert s["total_cycles_before"] is not None and s["total_cycles_after"] is not None
    assert s["total_cycles_after"] <= s["total_cycles_before"]
    assert s["wasted_cycles_after"] == 0.0


def test_statistics_lines_with_and_without_prefix():
    text = "\n".join([
        "I1128 17:14:24.741574   25332 latency_hiding_scheduler.cc:4268] "
        "[latency-hiding-scheduler] Statistics before scheduling:",
        "I1128 17:14:24.742001   25332 latency_hiding_scheduler.cc:4271] Total wasted cycles: 95.7108",
        "I1128 17:14:24.742004   25332 latency_hiding_scheduler.cc:4271] Wasted cycles for all-reduce: 50.0583",
        "I1128 17:14:24.742033   25332 latency_hiding_scheduler.cc:4271] Total cycles: 134.936",
        "Statistics after scheduling:",
        "For computation: main.3_spmd, module jit_call(1)",
        "Total wasted cycles: 72.7107",
        "Total cycles: 111.936",
    ])  # fmt: skip
    (s,) = xla_stats.parse(text)
    assert s.before.total_cycles == 134.936 and s.before.wasted_by == {"all-reduce": 50.0583}
    assert s.after.total_cycles == 111.936 and s.after.computation == "main.3_spmd"


def test_replay_of_the_real_pgle_schedule_matches_xla():
    """Same schedule, same costs: pgle's simulator gives XLA's own total."""
    module = hlo_text.parse((DATA / "pgle.hlo.txt").read_text())
    table = costs.from_profile(str(DATA / "pgle-profile.pbtxt"))
    (s,) = xla_stats.parse((DATA / "pgle.log").read_text())
    rep = replay.replay(prediction.schedule_of(module), table)
    assert rep.missing == []
    assert rep.total == pytest.approx(s.after.total_cycles, rel=0.05)


def _ins(name, opcode, operands=(), shape="f32[8]"):
    return Instruction(name, opcode, shape, tuple(operands), "")


def test_replay_async_overlap_and_exposed_time():
    sched = [
        _ins("p", "parameter"),
        _ins("all-gather-start", "all-gather-start", ["p"]),
        _ins("fusion", "fusion", ["p"]),
        _ins("all-gather-done", "all-gather-done", ["all-gather-start"]),
    ]
    # start 1 cycle, fusion 10, done 1, then the rest of the 30-cycle latency: 30 - 11 = 19
    rep = replay.replay(sched, {"p": 0.0, "all-gather-start": 30.0, "fusion": 10.0})
    assert rep.total == pytest.approx(31.0) and rep.wasted == pytest.approx(19.0)
    hidden = replay.replay(sched, {"p": 0.0, "all-gather-start": 5.0, "fusion": 10.0})
    assert hidden.total == pytest.approx(12.0) and hidden.wasted == 0.0


def test_replay_resource_limit_serializes_one_family():
    sched = [
        _ins("p", "parameter"),
        _ins("a-start", "all-gather-start", ["p"]),
        _ins("b-start", "all-gather-start", ["p"]),
        _ins("f", "fusion", ["p"]),
        _ins("a-done", "all-gather-done", ["a-start"]),
        _ins("b-done", "all-gather-done", ["b-start"]),
    ]
    c = {"p": 0.0, "a-start": 20.0, "b-start": 20.0, "f": 30.0}
    free = replay.replay(sched, c, limit=None)
    one = replay.replay(sched, c, limit=1)
    assert free.wasted == 0.0
    # b waits for a (issued at 1, done at 21), so it finishes at 41; b's done comes at 34
    assert one.total == pytest.approx(41.0) and one.wasted == pytest.approx(41 - 34)


def test_cannot_help_without_async_collectives():
    module = hlo_text.parse(
        "HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
        "  %p = f32[8]{0} parameter(0)\n"
        "  ROOT %fusion = f32[8]{0} fusion(%p), kind=kLoop, calls=%c\n}\n"
    )
    arm = {"module_hlo": module, "stats": [], "costs": {"p": 0.0, "fusion": 3.0}}
    pred = prediction.predict({"default": arm, "pgle": arm}, arm["costs"])
    assert pred["cannot_help"] and "no async collective" in pred["why"]


def test_what_if_rules():
    ag = _ins("all-gather-start.1", "all-gather-start")
    f = _ins("fusion.2", "fusion")
    table = {"all-gather-start.1": 10.0, "fusion.2": 4.0}
    out = costs.apply_what_if(table, [ag, f], [costs.parse_what_if("all-gather*=x2")])
    assert out == {"all-gather-start.1": 20.0, "fusion.2": 4.0}
    out = costs.apply_what_if(table, [ag, f], [costs.parse_what_if("compute=7us")])
    assert out["fusion.2"] == 7.0
    out = costs.apply_what_if(table, [ag, f], [costs.parse_what_if("all-gather=x0.5")])
    assert out["all-gather-start.1"] == 5.0
    for bad in ("all-gather", "x=y", "collective=x-1", "=x2"):
        with pytest.raises(BadInput):
            costs.parse_what_if(bad)


def test_derived_profile_is_a_profile_pgle_reads(tmp_path):
    table = {"a": 1.5, "b": 0.0}
    p = tmp_path / "p.pbtxt"
    p.write_bytes(costs.profile_text(table))
    assert dict(files.read_profile(p).costs) == table


def test_missing_plugin_says_what_to_install(tmp_path):
    # A regular `jax_plugins` package first on the path hides any installed CUDA plugin.
    (tmp_path / "jax_plugins").mkdir()
    (tmp_path / "jax_plugins" / "__init__.py").write_text("")
    script = tmp_path / "s.py"
    script.write_text("print('never run')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    p = subprocess.run(
        [sys.executable, "-m", "pgle", "estimate", "--json", str(script)],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    assert "pip install 'pgle[estimate]'" in p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / ".pgle").exists()  # refused before anything ran
    json.loads(p.stdout) if p.stdout.strip() else None
