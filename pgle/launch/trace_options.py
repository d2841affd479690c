"""What pgle's profiling window asks the JAX profiler for (issue 36, "traces that stop in seconds").

PGLE needs the device activity with each op's `hlo_op` / `hlo_module` stats (the device tracer:
CUPTI on GPU), the HLO protos of the metadata plane (the modules' fingerprints) and the host's
StepTraceAnnotation events (the step window `pgle report` reads). jax.profiler's defaults also
record every Python call (the Python tracer) and XLA's runtime internals at host level 2;
on 2x8 GPUs a default stop_trace took 6-8 minutes (marin #5528). So collect asks, by default:

- `host_tracer_level=1`: user annotations only (StepTraceAnnotation, TraceAnnotation; level 0
  would drop the steps too, checked on jax 0.10.2 CPU);
- `python_tracer_level=0`: no Python-call events (a loop of 2,000 Python calls per step made a
  CPU trace 10x bigger and its stop 15x slower, jax 0.10.2);
- `enable_hlo_proto=True` (jax's default, said explicitly): the fingerprints;
- the device tracer untouched: jax's binding has no `device_tracer_level` (jax 0.6 .. 0.12;
  an assignment lands in the Python object's own dict and changes nothing: jax #39938), and
  the device activity is what PGLE reads.

`--trace-detail full` passes no options: jax's defaults. jax < 0.6 takes no profiler options
at all (`start_trace(log_dir, create_perfetto_link, create_perfetto_trace)`, 0.4.35 .. 0.5.3):
the trace is the default one and the record says why.

Runs inside the workload's process (pgle.launch.harness): the standard library only; jax is
imported when the window first starts (the workload imported it by then).
"""

from __future__ import annotations

from typing import Any

PGLE = "pgle"
FULL = "full"
DETAILS = (PGLE, FULL)

# What collect asks by default (the module docstring says why, field by field).
PGLE_OPTIONS: dict[str, int | bool] = {
    "host_tracer_level": 1,
    "python_tracer_level": 0,
    "enable_hlo_proto": True,
}


def build(detail: str) -> tuple[Any | None, dict[str, Any]]:
    """(the `profiler_options` to pass start_trace, or None for jax's defaults; the record of
    what was asked and what took: {"detail", "asked", "ignored", "why"}).

    `ignored`: fields the options object did not take as native settings (an assignment that
    only made a Python attribute, jax #39938, or a value that reads back different)."""
    record: dict[str, Any] = {"detail": detail, "asked": {}, "ignored": [], "why": None}
    if detail == FULL:
        record["why"] = "--trace-detail full: jax.profiler's defaults"
        return None, record
    try:
        import jax
        from jax import profiler
    except Exception as e:  # any failure means: jax's defaults
        record["why"] = f"jax.profiler could not be imported ({type(e).__name__})"
        return None, record
    cls = getattr(profiler, "ProfileOptions", None)
    if cls is None:
        record["why"] = (
            f"jax {getattr(jax, '__version__', '?')} takes no profiler options "
            "(jax.profiler.ProfileOptions is jax >= 0.6): the trace is jax's default"
        )
        return None, record
    try:
        options = cls()
    except Exception as e:  # a jaxlib whose ProfileOptions cannot be made
        record["why"] = f"jax.profiler.ProfileOptions() failed ({type(e).__name__}: {e})"
        return None, record
    for name, value in PGLE_OPTIONS.items():
        record["asked"][name] = value
        if not set_option(options, name, value):
            record["ignored"].append(name)
    return options, record


def set_option(options: Any, name: str, value: Any) -> bool:
    """Set one field of a ProfileOptions; False when it did not take: no such field, a value
    that reads back different, or an assignment that only made an attribute of the Python
    object (jax's ProfileOptions subclasses the native binding, so any name is accepted:
    `device_tracer_level`, jax #39938)."""
    try:
        setattr(options, name, value)
        own = getattr(options, "__dict__", {})
        return name not in own and bool(getattr(options, name) == value)
    except Exception:  # a field or a value this jaxlib does not take
        return False
