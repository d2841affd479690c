"""Run examples/train.py with jax.jit wrapped so that train_step's FLOPs are printed from
XLA's cost analysis through the public AOT API (`jit(f).lower(*args).compile()`): an
independent figure for tests/analysis/test_report.py to compare pgle report's FLOPs with."""

import runpy
import sys

import jax

_jit = jax.jit


def jit(fun=None, **kw):
    if fun is None:
        return lambda f: jit(f, **kw)
    jitted = _jit(fun, **kw)
    if getattr(fun, "__name__", "") != "train_step":
        return jitted
    done = []

    def call(*args):
        if not done:
            done.append(True)
            cost = jitted.lower(*args).compile().cost_analysis()
            print(f"FLOPS {cost['flops']!r}", flush=True)
        return jitted(*args)

    return call


jax.jit = jit
sys.argv = [sys.argv[1]] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
