"""The trace converter's column reader (pgle.profiles.xplane_columns): the same results as
the protobuf-object path and as jaxlib's converter, bit for bit, and a fallback to the
protobuf path for layouts it does not decode."""

from __future__ import annotations

import random

import pytest

from pgle.profiles import convert, xplane_columns
from pgle.profiles.convert import convert_trace_detailed
from pgle.profiles.files import parse_profile

from helpers.xspace import Event, TraceBuilder

jax_profiler = pytest.importorskip("jax.experimental.profiler")

FA, FB, FC = "a" * 32, "0123456789abcdef" * 2, "c" * 32
START_NS = 1_700_000_000_000_000_000


def random_trace(run, seed: int, *, refs_only: bool, scoped_ops: bool) -> None:
    """Hosts with modules, devices, streams (an async line), events with their stats on the
    event or its metadata, int64/uint64 program ids, shared timestamps, fragments; with
    `scoped_ops`, an op has a scope_range_id on every event or on none."""
    rng = random.Random(seed)
    modules = [("jit_a", 3, FA, "root"), ("jit_b", 4, FB, "module"), ("jit_c", 8, FC, "root")]
    for h in range(rng.randrange(1, 3)):
        t = TraceBuilder(f"h{h}", profile_start_ns=START_NS)
        # Line timestamps relative to the profile start (as TSL exports them) or absolute.
        absolute = rng.random() < 0.5
        for name, mid, fp, where in modules:
            if rng.random() < 0.8:
                t.add_module(name, mid, fp, where)
        for d in range(rng.randrange(1, 4)):
            for _ in range(rng.randrange(1, 4)):
                line = t.line(d, rng.choice(["Stream #1", "Stream #2", "XLA Ops", "Async XLA Ops"]),
                              timestamp_ns=rng.randrange(0, 1000) + (START_NS if absolute else 0))
                for _ in range(rng.randrange(0, 80)):
                    name, mid, _, _ = rng.choice(modules)
                    op = rng.choice([f"fusion.{rng.randrange(6)}", "all-gather-start.2", "copy.1", None])
                    scope = rng.randrange(3) if rng.random() < 0.4 else None
                    if scoped_ops:
                        scope = rng.randrange(5) if op and op.startswith("fusion") else None
                    line.append(Event(
                        op=op, module=rng.choice([name, name, name, None]),
                        program_id=rng.choice([mid, mid, mid, None, 99]),
                        start_ps=rng.choice([rng.randrange(0, 10**9), 5000]),
                        duration_ps=rng.randrange(0, 10**7),
                        scope_range_id=scope,
                        stats_on=rng.choice(["event", "event", "metadata"]),
                        as_ref=refs_only or rng.random() < 0.7,
                        program_id_type=rng.choice(["int64", "int64", "uint64"]),
                        metadata_name=rng.choice([None, None, "MemoryAllocation", "kernel_x"]),
                    ))
        t.write(run)


def by_python(monkeypatch, run, **kw):
    with monkeypatch.context() as m:
        m.setattr(xplane_columns, "event_columns", lambda *a, **k: None)
        return convert_trace_detailed(run, **kw)


def columns_only(monkeypatch, run, **kw):
    """The converter with the protobuf-object path forbidden: every plane must be read as columns."""
    def refuse(*a, **k):
        raise AssertionError("a plane fell back to the protobuf path")

    with monkeypatch.context() as m:
        m.setattr(convert, "_scan_plane", refuse)
        return convert_trace_detailed(run, **kw)


def result(conv):
    return ({fp: p.costs for fp, p in conv.profiles.items()}, conv.to_dict())


WINDOW = (START_NS + 100_000, START_NS + 600_000)
CASES = [dict(per_module=True), dict(per_module=True, stat="p90"), dict(per_module=True, stat="min"),
         dict(per_module=False, stat="mean"), dict(per_module=False, stat="median", qualify=True),
         dict(per_module=False, stat="max", merge_fragments=True),
         dict(per_module=True, steps_window=WINDOW),
         dict(per_module=True, steps_window=[WINDOW, (0, 400_000)])]


@pytest.mark.parametrize("seed", range(6))
def test_columns_equal_the_protobuf_path(tmp_path, monkeypatch, seed):
    run = tmp_path / "run"
    random_trace(run, seed, refs_only=True, scoped_ops=True)
    for kw in CASES:
        assert result(columns_only(monkeypatch, run, **kw)) == result(by_python(monkeypatch, run, **kw)), kw


@pytest.mark.parametrize("seed", range(6))
def test_columns_equal_jaxlib(tmp_path, monkeypatch, seed):
    run = tmp_path / "run"
    random_trace(run, 100 + seed, refs_only=True, scoped_ops=True)
    conv = columns_only(monkeypatch, run, per_module=False, stat="mean")
    expected = parse_profile(jax_profiler.get_profiled_instructions_proto(str(run)), "binary", "jaxlib")
    assert conv.profiles[""].costs and dict(conv.profiles[""].costs) == dict(expected.costs)


@pytest.mark.parametrize("seed", range(4))
def test_other_layouts_fall_back_with_the_same_results(tmp_path, monkeypatch, seed):
    """String-valued op stats and ops keyed both by scope ids and by timestamps take the
    protobuf path for their plane; the result is the same either way."""
    run = tmp_path / "run"
    random_trace(run, 200 + seed, refs_only=False, scoped_ops=False)
    for kw in CASES:
        assert result(convert_trace_detailed(run, **kw)) == result(by_python(monkeypatch, run, **kw)), kw


def test_string_valued_op_stat_takes_the_protobuf_path(tmp_path, monkeypatch):
    run = tmp_path / "run"
    t = TraceBuilder(profile_start_ns=START_NS)
    t.add_module("jit_a", 3, FA, "module")
    t.line(0, "Stream #1").extend([Event("fusion.1", "jit_a", 3, 0, 1000, as_ref=False),
                                   Event("fusion.1", "jit_a", 3, 5000, 3000)])
    t.write(run)
    calls = []
    real = convert._scan_plane
    monkeypatch.setattr(convert, "_scan_plane", lambda *a: calls.append(1) or real(*a))
    conv = convert_trace_detailed(run, per_module=False, stat="mean")
    assert calls == [1]  # the column reader declined the plane
    expected = parse_profile(jax_profiler.get_profiled_instructions_proto(str(run)), "binary", "jaxlib")
    assert dict(conv.profiles[""].costs) == dict(expected.costs) == {"fusion.1": 0.002}


def test_long_events_and_large_values(tmp_path, monkeypatch):
    """Events over 127 bytes (two-byte lengths), 10-byte varints (negative ids), big durations."""
    run = tmp_path / "run"
    t = TraceBuilder(profile_start_ns=START_NS)
    t.add_module("jit_a", 3, FA, "module")
    line = t.line(0, "Stream #1")
    for i in range(50):
        line.append(Event("fusion.%d" % (i % 3), "jit_a", 3, i * 10**12, 10**15 + i,
                          scope_range_id=-5 - i, metadata_name="k" * 200))
    t.serialize()
    plane = next(p for p in t.space.planes if p.name == "/device:GPU:0")
    for ev in plane.lines[0].events:  # pad every event past 127 bytes with a noise stat
        st = ev.stats.add(metadata_id=999)
        st.str_value = "x" * 150
    run.mkdir()
    (run / "h.xplane.pb").write_bytes(t.space.SerializeToString())
    for kw in CASES[:6]:
        assert result(columns_only(monkeypatch, run, **kw)) == result(by_python(monkeypatch, run, **kw)), kw
