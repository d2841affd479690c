"""pgle's trace converter on synthetic GPU traces, compared with jaxlib's own converter."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

import pytest

from pgle.errors import BadInput, ProfileError
from pgle.profiles.files import load_profile_source, parse_profile
from pgle.profiles.convert import apply_stat, convert_trace, convert_trace_detailed, parse_stat, read_log_fingerprints

from helpers.xspace import Event, TraceBuilder

jax_profiler = pytest.importorskip("jax.experimental.profiler")

FA, FB, FC = "a" * 32, "0123456789abcdef" * 2, "c" * 32
START_NS = 1_700_000_000_000_000_000


def jaxlib_convert(run_dir) -> dict[str, float]:
    """jaxlib's converter (public API jax.experimental.profiler, jax 0.10.2)."""
    profile = parse_profile(jax_profiler.get_profiled_instructions_proto(str(run_dir)), "binary", "jaxlib")
    names = [n for n, _ in profile.costs]
    assert len(names) == len(set(names))
    return dict(profile.costs)


def ours_single(run_dir, **kw) -> dict[str, float]:
    profile = convert_trace(run_dir, per_module=False, stat="mean", **kw)[""]
    names = [n for n, _ in profile.costs]
    assert len(names) == len(set(names))
    return dict(profile.costs)


def two_module_trace(host="host0", *, warmup=True, steps=4, devices=2, start_ns=START_NS) -> TraceBuilder:
    """train (fingerprint at module level) and eval (on the ROOT instruction) share `fusion.3`;
    warm-up executions run before the window; several devices and streams; an async line."""
    t = TraceBuilder(host, profile_start_ns=start_ns)
    t.add_module("jit_train", 5, FA, "module")
    t.add_module("jit_eval", 9, FB, "root")
    t.add_module("jit_other", 11, None, None)
    step_ps = 1_000_000_000  # 1 ms per step
    for d in range(devices):
        compute = t.line(d, "Stream #13(compute)")
        comm = t.line(d, "Stream #20(nccl)", display_name="Stream #20")
        async_line = t.line(d, "Async XLA Ops")
        first = 0 if warmup else 2
        for step in range(first, steps + 2):
            base = step * step_ps + d * 1000
            slow = 5 if step < 2 else 1  # warm-up executions are 5x slower
            compute += [
                Event("fusion.3", "jit_train", 5, base + 0, 10_000 * slow),
                Event("fusion.7", "jit_train", 5, base + 20_000, (3_000 + step) * slow, stats_on="metadata"),
                # One op, two kernels: same scope_range_id.
                Event("cublas-gemm.1", "jit_train", 5, base + 40_000, 7_000 * slow, scope_range_id=100 + step),
                Event("cublas-gemm.1", "jit_train", 5, base + 50_000, 1_000 * slow, scope_range_id=100 + step),
                Event("fusion.3", "jit_eval", 9, base + 500_000, 2_000 * slow, as_ref=False),
                Event("fusion.1", "jit_other", 11, base + 600_000, 4_000 * slow),
                Event("no-module", None, 5, base + 700_000, 50),
                Event(None, "jit_train", 5, base + 710_000, 50),
                Event("fusion.9", "jit_train", 5, base + 720_000, 10, metadata_name="MemoryAllocation"),
            ]
            comm += [Event("all-reduce-start.1", "jit_train", 5, base + 60_000, 20_000 * slow)]
            async_line += [Event("all-reduce-start.1", "jit_train", 5, base + 60_000, 999_999)]
    return t


def test_equal_to_jaxlib_on_two_module_trace(tmp_path):
    run = tmp_path / "run"
    two_module_trace().write(run)
    two_module_trace("host1", devices=3).write(run)
    expected = jaxlib_convert(run)
    assert f"{FB}::fusion.3" in expected and "fusion.3" in expected  # jaxlib: ROOT attribute only
    assert "fusion.9" not in expected and "all-reduce-start.1" in expected
    assert ours_single(run) == expected  # same names, same bits


@pytest.mark.parametrize("seed", range(12))
def test_equal_to_jaxlib_on_random_traces(tmp_path, seed):
    rng = random.Random(seed)
    run = tmp_path / "run"
    for h in range(rng.randrange(1, 3)):
        t = TraceBuilder(f"h{h}")
        modules = [("jit_a", 3, FA, "root"), ("jit_b", 4, FB, "module"), ("jit_c", 8, FC, "root")]
        for name, mid, fp, where in modules:
            if rng.random() < 0.8:
                t.add_module(name, mid, fp, where)
        prefix = "/device:TPU:" if seed == 5 else "/device:GPU:"
        for d in range(rng.randrange(1, 4)):
            for _ in range(rng.randrange(1, 4)):
                line = t.line(d, rng.choice(["Stream #1", "Stream #2", "XLA Ops", "Async XLA Ops"]),
                              timestamp_ns=rng.randrange(0, 1000), prefix=prefix)
                for _ in range(rng.randrange(0, 60)):
                    name, mid, _, _ = rng.choice(modules)
                    line.append(Event(
                        op=rng.choice([f"fusion.{rng.randrange(6)}", "all-gather-start.2", "copy.1", None]),
                        module=rng.choice([name, name, name, None]),
                        program_id=rng.choice([mid, mid, mid, None, 99]),
                        start_ps=rng.choice([rng.randrange(0, 10**9), 5000]),  # some equal timestamps
                        duration_ps=rng.randrange(0, 10**7),
                        scope_range_id=rng.choice([None, None, rng.randrange(3)]),
                        stats_on=rng.choice(["event", "event", "metadata"]),
                        as_ref=rng.random() < 0.7,
                        program_id_type=rng.choice(["int64", "int64", "uint64"]),
                    ))
        t.write(run)
    assert ours_single(run) == jaxlib_convert(run)


def test_real_cpu_trace_is_empty_like_jaxlib(tmp_path):
    """A real JAX profiler trace from CPU: no GPU plane, so both converters give nothing."""
    script = textwrap.dedent("""
        import sys, jax, jax.numpy as jnp
        f = jax.jit(lambda x: jnp.sin(x) @ x.T)
        x = jnp.ones((32, 32)); f(x).block_until_ready()
        jax.profiler.start_trace(sys.argv[1])
        for _ in range(3): f(x).block_until_ready()
        jax.profiler.stop_trace()
    """)
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "tb")], check=True, timeout=120,
                   capture_output=True)
    runs = os.listdir(tmp_path / "tb" / "plugins" / "profile")
    run = tmp_path / "tb" / "plugins" / "profile" / runs[0]
    result = convert_trace_detailed(run, per_module=True, stat="median")
    assert jaxlib_convert(run) == {} and ours_single(run) == {}
    assert result.profiles == {} and result.device_planes == 0
    assert any("no /device:GPU" in w for w in result.warnings)
    with pytest.raises(ProfileError, match="Pass the run folder itself"):
        convert_trace(tmp_path / "tb", per_module=False)

    # `pgle convert` says the trace has no GPU plane; --log would not help (issue 13, case 6).
    from click.testing import CliRunner

    from pgle.cli.main import cli

    # A directory OUT: bad input (2); a file OUT: the empty-profile report (1).
    for out, code in ((str(tmp_path / "dir") + "/", 2), (str(tmp_path / "one.pb"), 1)):
        r = CliRunner().invoke(cli, ["convert", str(run), out])
        assert r.exit_code == code, r.output
        assert "has no GPU plane" in r.stderr and "--log" not in r.stderr, r.stderr
        assert not os.path.exists(out)


def test_per_module_separates_modules_sharing_names(tmp_path):
    run = tmp_path / "run"
    two_module_trace(warmup=False).write(run)
    result = convert_trace_detailed(run, per_module=True, stat="median")
    profiles = result.profiles
    assert sorted(profiles) == sorted([FA, FB])  # jit_other has no fingerprint anywhere
    train, evalp = dict(profiles[FA].costs), dict(profiles[FB].costs)
    assert train["fusion.3"] == pytest.approx(0.01) and evalp["fusion.3"] == pytest.approx(0.002)
    # Two kernels of one gemm execution count as one 11 ns span (40_000 .. 51_000 ps).
    assert train["cublas-gemm.1"] == pytest.approx(0.011)
    assert "all-reduce-start.1" in train and train["all-reduce-start.1"] == pytest.approx(0.02)
    assert "fusion.9" not in train  # internal host event, as in jaxlib
    by_label = {m.label: m for m in result.modules}
    assert by_label["jit_train(5)"].fingerprint_source == "hlo-module"
    assert by_label["jit_eval(9)"].fingerprint_source == "hlo-root"
    assert by_label["jit_other(11)"].fingerprint is None
    assert any("jit_other(11) has no fingerprint" in w for w in result.warnings)


def test_step_window_drops_warmup(tmp_path):
    run = tmp_path / "run"
    two_module_trace(warmup=True, steps=4).write(run)
    everything = convert_trace(run, per_module=True, stat="max")
    assert dict(everything[FA].costs)["fusion.3"] == pytest.approx(0.05)  # warm-up, 5x slower
    window = (START_NS + 2_000_000, START_NS + 6_000_000)  # steps 2..5, in epoch ns
    result = convert_trace_detailed(run, per_module=True, stat="max", steps_window=window)
    assert dict(result.profiles[FA].costs)["fusion.3"] == pytest.approx(0.01)
    assert dict(result.profiles[FA].costs)["fusion.7"] == pytest.approx(0.003005)  # step 5: 3_005 ps
    assert result.events_outside_window > 0
    nothing = convert_trace_detailed(run, per_module=True, steps_window=[(0, 1)])
    assert nothing.profiles == {} and any("outside the step window" in w for w in nothing.warnings)


def test_fingerprints_from_log_both_prefix_styles(tmp_path):
    run = tmp_path / "run"
    t = TraceBuilder()
    t.add_module("jit_train", 5, None, None)  # no fingerprint in the trace
    line = t.line(0, "Stream #1")
    line += [Event("fusion.3", "jit_train", 5, 0, 1000), Event("fusion.3", "jit_step", 6, 0, 3000)]
    t.write(run)
    log = tmp_path / "log.txt"
    log.write_text(
        "2024-01-01 10:00:00.000001: I external/xla/xla/service/gpu/gpu_hlo_schedule.cc:573] "
        f"Fingerprint before LHS for module jit_train(5) = {FA}\n"
        f"I0822 12:34:56.789012  12345 gpu_hlo_schedule.cc:538] Fingerprint before LHS for module "
        f"jit_step(6) = {FC.upper()}\n"
        "unrelated line\n")
    profiles = convert_trace(run, per_module=True, stat="median", log_path=log)
    assert profiles == {FA: parse_profile(b"", "binary", "x").__class__([("fusion.3", 0.001)]),
                        FC: parse_profile(b"", "binary", "x").__class__([("fusion.3", 0.003)])}
    # Single file, qualified from every source (jaxlib would find neither fingerprint).
    single = convert_trace(run, per_module=False, stat="median", log_path=log, qualify=True)[""]
    assert dict(single.costs) == {f"{FA}::fusion.3": 0.001, f"{FC}::fusion.3": 0.003}
    assert dict(convert_trace(run, per_module=False, stat="mean")[""].costs) == {"fusion.3": 0.002}


def test_conflicting_log_lines_are_dropped(tmp_path):
    log = tmp_path / "log"
    log.write_text(f"Fingerprint before LHS for module m(1) = {FA}\n"
                   f"Fingerprint before LHS for module m(1) = {FB}\n"
                   f"Fingerprint before LHS for module n(2) = {FB}\n")
    fps, warnings = read_log_fingerprints(log)
    assert fps == {("n", 2): FB} and "m(1)" in warnings[0]
    with pytest.raises(BadInput, match="does not exist"):
        read_log_fingerprints(tmp_path / "missing.log")


def test_statistics():
    assert parse_stat("MEDIAN") == "median" and parse_stat("p90") == "p90"
    for bad in ("p101", "avg", "p-1", ""):
        with pytest.raises(BadInput, match="statistic"):
            parse_stat(bad)
    vals = [4.0, 1.0, 3.0, 2.0]
    assert apply_stat(vals, "median") == 2.5 and apply_stat(vals, "mean") == 2.5
    assert apply_stat(vals, "min") == 1.0 and apply_stat(vals, "max") == 4.0
    assert apply_stat(vals, "p90") == 3.0 and apply_stat(vals, "p100") == 4.0  # jaxlib's index rule


def test_bad_trace_folders(tmp_path):
    with pytest.raises(ProfileError, match="does not exist"):
        convert_trace(tmp_path / "nope", per_module=True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProfileError, match="no .xplane.pb"):
        convert_trace(tmp_path / "empty", per_module=True)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "h.xplane.pb").write_bytes(b"\x0a\xff\xff\xff")
    with pytest.raises(ProfileError, match="not a valid XSpace"):
        convert_trace(tmp_path / "bad", per_module=True)
    with pytest.raises(BadInput, match="ends before"):
        convert_trace(tmp_path / "bad", per_module=True, steps_window=(5, 1))


def test_convert_cli_writes_a_directory_xla_reads(tmp_path):
    from click.testing import CliRunner

    from pgle.cli.main import cli

    run = tmp_path / "run"
    two_module_trace(warmup=False).write(run)
    out = tmp_path / "profiles"
    r = CliRunner().invoke(cli, ["convert", str(run), str(out) + "/", "--stat", "p50"])
    assert r.exit_code == 0, r.output
    src = load_profile_source(out)
    assert sorted(src.modules) == sorted([FA, FB]) and not src.ignored
    assert "has no fingerprint" in r.stderr
    r = CliRunner().invoke(cli, ["convert", str(run), str(tmp_path / "one.pbtxt"), "--stat", "mean"])
    assert r.exit_code == 0, r.output
    assert dict(load_profile_source(tmp_path / "one.pbtxt").modules[""].costs) == jaxlib_convert(run)
    r = CliRunner().invoke(cli, ["convert", str(run), str(tmp_path / "x.pb"), "--stat", "avg"])
    assert r.exit_code == 2 and "unknown statistic" in r.stderr
