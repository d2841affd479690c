"""What collect asks the JAX profiler for (pgle.launch.trace_options, issue 36), on the real
jax.profiler of this environment and, where the lane venvs are built, of the oldest and newest
jax pgle supports: jax < 0.6 has no ProfileOptions at all; jax's binding takes no
`device_tracer_level` (an assignment only makes a Python attribute: jax #39938)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.pgle_testing import REPO

from pgle.launch import trace_options

LANES = Path(os.environ.get("PGLE_LANE_VENVS", Path.home() / ".cache/pgle-lane/venvs"))


def test_pgles_options_take_on_this_jax() -> None:
    options, record = trace_options.build("pgle")
    assert record == {
        "detail": "pgle",
        "asked": {"host_tracer_level": 1, "python_tracer_level": 0, "enable_hlo_proto": True},
        "ignored": [],
        "why": None,
    }
    assert (options.host_tracer_level, options.python_tracer_level) == (1, 0)


def test_full_detail_is_jaxs_defaults() -> None:
    options, record = trace_options.build("full")
    assert options is None and record["asked"] == {} and "defaults" in record["why"]


def test_a_setting_the_binding_does_not_have_is_caught() -> None:
    """jax #39938, on the real ProfileOptions: `device_tracer_level = 0` raises nothing and
    reads back 0, yet it is only the Python object's attribute; set_option says it did not
    take. A native field does."""
    from jax import profiler

    options = profiler.ProfileOptions()
    options.device_tracer_level = 0  # what users write, silently
    assert options.device_tracer_level == 0  # it reads back: nothing tells it did nothing
    assert trace_options.set_option(profiler.ProfileOptions(), "device_tracer_level", 0) is False
    assert trace_options.set_option(profiler.ProfileOptions(), "python_tracer_level", 0) is True
    assert trace_options.set_option(profiler.ProfileOptions(), "host_tracer_level", "x") is False


def _lane_record(version: str) -> dict:
    python = LANES / f"jax-{version}" / "bin" / "python"
    if not python.exists():
        if os.environ.get("PGLE_REQUIRE_XLA_GPU") == "1":  # the lane step of .ci/run
            pytest.fail(f"PGLE_REQUIRE_XLA_GPU=1 but no lane venv for jax {version}")
        pytest.skip(f"no lane venv for jax {version} at {python.parent.parent}")
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); "
        "from pgle.launch import trace_options; "
        "print(json.dumps(trace_options.build('pgle')[1]))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "JAX_"))}
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run([str(python), "-c", code, str(REPO)], capture_output=True,
                         timeout=300, env=env, check=True)
    return json.loads(out.stdout.decode().strip().splitlines()[-1])


# The lane's venvs exist only once .ci/xla_gpu_lane.sh made them: these run in the lane step.
@pytest.mark.xla_gpu
def test_jax_before_0_6_takes_no_options_and_the_record_says_why() -> None:
    record = _lane_record("0.4.35")
    assert record["asked"] == {} and record["ignored"] == []
    assert "jax 0.4.35 takes no profiler options" in record["why"]


@pytest.mark.xla_gpu
def test_the_newest_jax_takes_pgles_options() -> None:
    record = _lane_record("0.12.0.1")
    assert record["ignored"] == [] and record["why"] is None
    assert record["asked"]["python_tracer_level"] == 0


def test_without_profile_options_or_jax_the_trace_is_jaxs_default_and_says_why(monkeypatch):
    """jax < 0.6 has no ProfileOptions (the lane tests run the real 0.4.35); a jaxlib whose
    ProfileOptions cannot be made; jax not importable: each the default trace, with why."""
    import jax
    from jax import profiler

    assert trace_options.build("full") == (None, {
        "detail": "full", "asked": {}, "ignored": [],
        "why": "--trace-detail full: jax.profiler's defaults"})
    with monkeypatch.context() as m:
        m.delattr(profiler, "ProfileOptions")
        assert trace_options.build("pgle") == (None, {
            "detail": "pgle", "asked": {}, "ignored": [],
            "why": f"jax {jax.__version__} takes no profiler options (jax.profiler."
                   "ProfileOptions is jax >= 0.6): the trace is jax's default"})
        m.delattr(jax, "__version__")
        assert trace_options.build("pgle")[1]["why"].startswith("jax ? takes no profiler")

    class Broken:
        def __init__(self) -> None:
            raise RuntimeError("no\nmore")

    with monkeypatch.context() as m:
        m.setattr(profiler, "ProfileOptions", Broken)
        assert trace_options.build("pgle")[1]["why"] == (
            "jax.profiler.ProfileOptions() failed (RuntimeError: no\nmore)")
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "jax", None)  # `import jax` raises ModuleNotFoundError
        assert trace_options.build("pgle") == (None, {
            "detail": "pgle", "asked": {}, "ignored": [],
            "why": "jax.profiler could not be imported (ModuleNotFoundError)"})


class _Native:
    """A binding's options as a native type has them: fixed fields, no instance __dict__
    (jaxlib's own ProfileOptions on a jax that does not subclass it)."""

    __slots__ = ("host_tracer_level", "enable_hlo_proto")


def test_a_field_an_options_type_lacks_is_named_as_ignored(monkeypatch):
    from jax import profiler

    assert trace_options.set_option(_Native(), "host_tracer_level", 1) is True
    assert trace_options.set_option(_Native(), "python_tracer_level", 0) is False
    monkeypatch.setattr(profiler, "ProfileOptions", _Native)
    options, record = trace_options.build("pgle")
    assert isinstance(options, _Native) and options.host_tracer_level == 1
    assert record == {
        "detail": "pgle",
        "asked": {"host_tracer_level": 1, "python_tracer_level": 0, "enable_hlo_proto": True},
        "ignored": ["python_tracer_level"],
        "why": None,
    }
