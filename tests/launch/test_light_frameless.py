"""A light step's calls, in-process on real jax (CPU): once the rule settles on an unmarked
loop's step function, its proxy's call is a C-level call that counts (no Python frame of
pgle's per call, issue 33), the watcher's thread still gets a sample now and then, and every
count stays exact through the moves to framed (another function is called) and back to the
full count (the light ends)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

import jax
import jax.numpy as jnp

from helpers.mutmut_names import plain_counts
from pgle.launch import harness


class _NoWindow:
    """ProfilerWindow outside any window: it counts nothing."""

    counting = False


def _step_proxy(counter: harness.JitCounter, name: str = "jit(step)") -> Any:
    return harness._Jitted(jax.jit(lambda x: jnp.tanh(x @ x)), name, counter, _NoWindow())


def _until_frameless(counter: harness.JitCounter, step: Any, x: Any) -> tuple[Any, int]:
    """Calls `step` until its calls are frameless; returns (x, the calls made)."""
    calls = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        x = step(x)
        calls += 1
        light = counter.light
        if light is not None and type(step) is not harness._Jitted:
            assert light.frameless and type(step) in light.calls, "light, but framed"
            return x, calls
    raise AssertionError(f"not frameless after {calls} calls: {counter.watcher.summary()}")


def _harness_frames(fn: Any) -> Counter[str]:
    """The Python functions of pgle's harness that ran in this thread while `fn` ran."""
    frames: Counter[str] = Counter()
    own = harness.__file__

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename == own:
            frames[frame.f_code.co_qualname] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return frames


def _ran(frames: Counter[str], name: str) -> int:
    """How often `name` (`_framed_call.<locals>.__call__`) ran, also under the names of the
    mutation run's copy of the harness."""
    return plain_counts(frames)[name]


def _frameless_beside_another() -> tuple[harness.JitCounter, Any, Any, Any, int, Any]:
    """A light step gone frameless, and another jitted function of the same counter (not
    called yet): counter, step, other, the step's last output, its calls, the light."""
    counter = harness.JitCounter()
    counter.may_go_light = lambda: True
    step = _step_proxy(counter)
    other = harness._Jitted(jax.jit(lambda x: x.sum()), "jit(loss)", counter, _NoWindow())
    x, calls = _until_frameless(counter, step, jnp.ones((16, 16)) * 0.01)
    assert counter.light is not None
    return counter, step, other, x, calls, counter.light


def test_a_light_steps_calls_run_no_frame_of_pgles_and_are_all_counted() -> None:
    counter = harness.JitCounter()
    counter.may_go_light = lambda: True
    step = _step_proxy(counter)
    x, calls = _until_frameless(counter, step, jnp.ones((16, 16)) * 0.01)
    box = [x]

    def loop() -> None:
        for _ in range(3000):
            box[0] = step(box[0])

    frames = _harness_frames(loop)
    jax.block_until_ready(box[0])
    # The watcher's thread asked for a few samples meanwhile (each a handful of frames), but
    # no call went through a Python frame of its own: 3,000 calls, far fewer frames.
    samples = _ran(frames, "_frameless_sample.<locals>.__call__")
    assert sum(frames.values()) < 300, frames
    assert not _ran(frames, "_counted_call") and not _ran(frames, "_framed_call.<locals>.__call__"), frames
    counter.watcher.finish(30.0)
    assert counter.stats["jit(step)"][0] == calls + 3000
    assert counter.light is not None and counter.light.frameless
    # Sampled: the spans between samples time the light executions (the loop's throughput).
    assert samples >= 1 and counter.work_sum["jit(step)"][1] > calls, (frames, counter.work_sum)


def test_another_function_turns_the_light_step_framed_and_the_counts_stay_exact() -> None:
    counter, step, other, x, calls, light = _frameless_beside_another()
    for _ in range(50):
        x = step(x)
    other(x)  # an eval between the step's calls: spans must hold one function's work again
    assert not light.frameless
    for _ in range(50):
        x = step(x)
    frames = _harness_frames(lambda: step(x))
    assert _ran(frames, "_framed_call.<locals>.__call__") == 1, frames  # framed: it keeps the output
    jax.block_until_ready(x)
    counter.watcher.finish(30.0)
    assert counter.stats["jit(step)"][0] == calls + 101
    assert counter.stats["jit(loss)"][0] == 1


def _frameless_then_unlit(more: int) -> tuple[harness.JitCounter, Any, Any, int]:
    """A step gone frameless, called `more` times more, then unlit (as when the workload
    starts marking its steps): (counter, step, x, its calls before the `more`)."""
    counter = harness.JitCounter()
    allowed = [True]
    counter.may_go_light = lambda: allowed[0]
    step = _step_proxy(counter)
    x, calls = _until_frameless(counter, step, jnp.ones((16, 16)) * 0.01)
    for _ in range(more):
        x = step(x)
    allowed[0] = False
    counter.consider_light()
    assert counter.light is None
    return counter, step, x, calls


def test_a_frameless_step_goes_back_to_the_full_count_when_the_light_ends() -> None:
    counter, step, x, calls = _frameless_then_unlit(20)
    x = step(x)  # the armed call: framed, then back to the full count
    assert type(step) is harness._Jitted
    frames = _harness_frames(lambda: step(x))
    assert _ran(frames, "_counted_call") == 1, frames
    jax.block_until_ready(x)
    counter.watcher.finish(30.0)
    assert counter.stats["jit(step)"][0] == calls + 22


def test_a_step_unlit_with_no_call_after_still_has_every_execution_counted_at_exit() -> None:
    counter, step, x, calls = _frameless_then_unlit(30)  # and never called again
    jax.block_until_ready(x)
    counter.watcher.finish(30.0)
    assert counter.stats["jit(step)"][0] == calls + 30


def test_a_new_proxy_of_the_light_step_after_it_went_framed_is_framed_too() -> None:
    """A script that wraps its step anew after the light step went framed (another proxy of
    the same function, as `jax.jit(step)(x)` inside the loop makes): each new proxy takes the
    framed light call, through one class per proxy class (a subclass of it, named as it),
    and every call still counts."""
    counter, step, other, x, calls, light = _frameless_beside_another()
    other(x)
    assert not light.frameless
    fn = jax.jit(lambda x: jnp.tanh(x @ x))
    again = [harness._Jitted(fn, "jit(step)", counter, _NoWindow()) for _ in range(2)]
    for proxy in again:
        for _ in range(5):
            x = proxy(x)
    (cls,) = {type(proxy) for proxy in again}
    assert cls.__bases__ == (harness._Jitted,) and cls.__name__ == "_Jitted"
    frames = _harness_frames(lambda: again[0](x))
    assert _ran(frames, "_framed_call.<locals>.__call__") == 1, frames
    jax.block_until_ready(x)
    counter.watcher.finish(30.0)
    assert counter.stats["jit(step)"][0] == calls + 11
