"""The harness's proxies of the workload's jitted functions, in process on real jax (CPU):
`jax.jit` as the harness replaces it (`_counting`) returns a proxy that behaves as jax's own
function wherever a script uses one (attributes, repr, copies, as a method, the AOT path
`.trace(...).lower(...).compile()`), and counts the executions under the function's name."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest

from pgle.launch import harness


@pytest.fixture
def counted(tmp_path: Path) -> Any:
    """jax.jit as the harness replaces it, with its counter (no profiler window)."""
    events = harness.Events(str(tmp_path / "events.jsonl"))
    counter = harness.JitCounter()
    window = harness.ProfilerWindow(None, events)
    yield harness._counting(jax.jit, "jit", counter, window), counter
    counter.watcher.finish(30.0)
    events.close()


def _executions(counter: harness.JitCounter) -> dict[str, int]:
    return {name: row[0] for name, row in counter.stats.items()}


def affine(x: Any, *, bias: float) -> Any:
    return x * 2.0 + bias


def test_the_aot_path_runs_and_its_executions_count_under_the_functions_name(
        counted: Any) -> None:
    jit, counter = counted
    f = jit(affine)
    x = jnp.ones((4,))
    traced = f.trace(x, bias=1.0)
    assert isinstance(traced, harness._Traced)
    assert traced.jaxpr == jax.jit(affine).trace(x, bias=1.0).jaxpr  # jax's own, forwarded
    lowered = traced.lower(lowering_platforms=("cpu",))
    assert isinstance(lowered, harness._Lowered)
    compiled = lowered.compile()
    assert isinstance(compiled, harness._Compiled)
    assert compiled(x, bias=1.0).tolist() == [3.0] * 4
    assert compiled(x, bias=0.5).tolist() == [2.5] * 4
    assert f.lower(x, bias=1.0).compile()(x, bias=1.0).tolist() == [3.0] * 4
    assert _executions(counter) == {"jit(affine)": 3}


def test_a_wrong_aot_call_fails_as_jaxs_own_does(counted: Any) -> None:
    """The proxies pass the call on as it was made: what jax refuses, they refuse."""
    jit, _counter = counted
    x = jnp.ones((4,))
    own, traced = jax.jit(affine).trace(x, bias=1.0), jit(affine).trace(x, bias=1.0)
    for args, kwargs in (((("cpu",),), {}), ((), {"no_such_option": 1})):
        with pytest.raises(TypeError):
            own.lower(*args, **kwargs)
        with pytest.raises(TypeError):
            traced.lower(*args, **kwargs)


def test_a_proxy_shows_and_forwards_as_jaxs_function_and_survives_a_copy(
        counted: Any) -> None:
    jit, counter = counted
    f = jit(affine)
    assert repr(f) == repr(jax.jit(affine))
    x = jnp.ones((3,))
    assert f.eval_shape(x, bias=1.0).shape == (3,)  # an attribute of jax's function
    assert f.__name__ == "affine" and f.__doc__ == jax.jit(affine).__doc__
    with pytest.raises(AttributeError, match="no_such_attribute"):
        _ = f.no_such_attribute
    g = copy.copy(f)  # built without __init__, then its state copied over
    assert repr(g) == repr(f) and g(x, bias=0.0).tolist() == [2.0] * 3
    bare = harness._Jitted.__new__(harness._Jitted)  # as copy/pickle first build it
    with pytest.raises(AttributeError, match="_pgle"):
        _ = bare._pgle
    assert _executions(counter) == {"jit(affine)": 1}


def test_a_jitted_method_binds_its_instance_as_jaxs_does(counted: Any) -> None:
    jit, counter = counted

    class Model:
        scale = 3.0

        @functools.partial(jit, static_argnums=0)
        def apply(self, x: Any) -> Any:
            return x * self.scale

    model = Model()
    assert isinstance(Model.__dict__["apply"], harness._Jitted)
    assert Model.apply is Model.__dict__["apply"]  # looked up on the class: itself
    assert model.apply(jnp.ones((2,))).tolist() == [3.0, 3.0]
    assert Model.apply(model, jnp.ones((2,))).tolist() == [3.0, 3.0]
    assert _executions(counter) == {"jit(apply)": 2}


def test_a_marked_loops_calls_count_each_execution_once_and_keep_the_last_output(
        counted: Any) -> None:
    """Once a marked loop's steps are counted by their markers (JitCounter.marked), a known
    function's call only counts its execution (its row, the progress file's count) and keeps
    its output for the step's completion; one class per proxy class and function, shared by
    its proxies; a call traced inside another counted call is no execution."""
    jit, counter = counted
    f = jit(affine)
    x = jnp.ones((4,))
    f(x, bias=1.0)  # the full count: its row is made
    counter.marked = True
    progress = harness._EXECUTIONS[0]
    out = f(x, bias=2.0)
    assert out.tolist() == [4.0] * 4 and harness._depth.cell[1] is out
    assert type(f) is not harness._Jitted and type(f).__bases__ == (harness._Jitted,)
    again = jit(affine)  # another proxy of the function (jax.jit(f) written twice)
    again(x, bias=0.0)
    assert type(again) is type(f)

    @jit
    def outer(a: Any) -> Any:
        return f(a, bias=1.0) + again(a, bias=0.0)  # traced inside outer's counted call

    assert outer(x).tolist() == [5.0] * 4  # its first call: the full count
    assert outer(x).tolist() == [5.0] * 4  # marked from now on
    assert outer(jnp.ones((2,))).tolist() == [5.0] * 2  # traced again, inside the marked call
    assert _executions(counter) == {"jit(affine)": 3, "jit(outer)": 3}
    assert harness._EXECUTIONS[0] - progress == 5


def test_each_execution_auto_pgle_sees_is_one_on_the_progress_count() -> None:
    """Without pgle's own count (auto, prewarm), the executions jax dispatches through auto
    PGLE's hook keep the progress file's count (observe_pgle's `on_execution`)."""
    progress = harness._EXECUTIONS[0]
    harness._count_execution()
    harness._count_execution()
    assert harness._EXECUTIONS[0] - progress == 2


def test_an_aot_compile_is_the_functions_even_inside_another_counted_call(
        counted: Any) -> None:
    """jax's backend-compile event (what the harness attributes to a function, JitCounter
    .compiled) comes while the compiling function's name is the current one: `.compile()` of
    a proxy's lowering is its function's, and once it returns, the counted call it ran inside
    (traced in `outer`) is the current one again, for outer's own compile after it. Inside
    a counted call the AOT compile stays that call's: its time is part of outer's first call.
    jax's caches are cleared first: a worker that compiled affine for (3,) in an earlier test
    would skip the inner compile and its event (CI, stop 47)."""
    from jax._src.dispatch import BACKEND_COMPILE_EVENT

    jax.clear_caches()
    jit, _counter = counted
    f = jit(affine)
    seen: list[tuple[str | None, str | None]] = []

    def listener(event: str, _seconds: float, **kwargs: Any) -> None:
        if event == BACKEND_COMPILE_EVENT and kwargs.get("fun_name") in ("jit(affine)",
                                                                           "jit(outer)"):
            seen.append((harness._depth.name, kwargs.get("fun_name")))

    @jit
    def outer(a: Any) -> Any:
        f.lower(jnp.ones((3,)), bias=1.0).compile()  # an AOT compile while outer is traced
        return a + 1.0

    x5, x2 = jnp.ones((5,)), jnp.ones((2,))
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        f.lower(x5, bias=1.0).compile()
        assert seen == [("jit(affine)", "jit(affine)")] and harness._depth.name is None
        outer(x2)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    # the AOT compile inside outer is outer's, then outer's own compile after it
    assert seen[1:] == [("jit(outer)", "jit(affine)"), ("jit(outer)", "jit(outer)")], seen


def test_a_wrong_compile_call_fails_as_jaxs_own_does(counted: Any) -> None:
    jit, _counter = counted
    x = jnp.ones((4,))
    own, lowered = jax.jit(affine).lower(x, bias=1.0), jit(affine).lower(x, bias=1.0)
    for args, kwargs in (((None, None), {}), ((), {"no_such_option": 1})):
        with pytest.raises(TypeError):
            own.compile(*args, **kwargs)
        with pytest.raises(TypeError):
            lowered.compile(*args, **kwargs)
