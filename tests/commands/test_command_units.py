"""What `pgle nsys` counts as drift from the prewarm run (only what changes a cache key), how
it replays the prewarm's environment (the user's own variables win), and the ranks it profiles."""

from __future__ import annotations

import jax
import pytest

from pgle.commands.auto_env import nsys_environment
from pgle.commands.nsys import drift, parse_ranks
from pgle.errors import BadInput
from pgle.evidence.jax_log import key_flag_words
from pgle.launch.workload import Workload
from pgle.redact import REDACTED

W = Workload("/p/train.py", None, ())
MENV = {"jax": jax.__version__, "user_XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true "
        "--xla_gpu_all_reduce_combine_threshold_bytes=1024", "argv_xla_flags": [], "jax_variables": {"JAX_DEFAULT_PRNG_IMPL": "rbg"}}


def test_reordered_xla_flags_are_not_drift():
    # JAX sorts the flags before hashing them: the order never changes a cache key.
    env = {"XLA_FLAGS": "--xla_gpu_all_reduce_combine_threshold_bytes=1024  --xla_gpu_enable_latency_hiding_scheduler=true",
           "JAX_DEFAULT_PRNG_IMPL": "rbg"}
    assert drift(MENV, env, W) == []
    assert key_flag_words("--b=1 --a=2") == key_flag_words("--a=2 --b=1") == ["--a=2", "--b=1"]
    changed = {**env, "XLA_FLAGS": "--xla_gpu_all_reduce_combine_threshold_bytes=2048 --xla_gpu_enable_latency_hiding_scheduler=true"}
    said = drift(MENV, changed, W)
    assert len(said) == 1 and said[0].startswith("XLA_FLAGS differ"), said


def test_flags_jax_leaves_out_of_the_key_are_not_drift():
    # --xla_dump_to never enters the cache key (xla_flags_to_exclude_from_cache_key, every
    # jax 0.4.35-0.12): dumping the HLO now hits the prewarmed cache, so nsys must not warn.
    env = {"XLA_FLAGS": MENV["user_XLA_FLAGS"] + " --xla_dump_to=/tmp/hlo", "JAX_DEFAULT_PRNG_IMPL": "rbg"}
    assert drift(MENV, env, W) == []
    assert key_flag_words("--xla_dump_to=/tmp/x --xla_a=1") == ["--xla_a=1"]


def test_the_workloads_xla_arguments_are_key_words_and_drift():
    assert key_flag_words("--xla_a=1", ["--xla_b=2", "--steps=3"]) == ["--xla_a=1", "--xla_b=2"]
    env = {"JAX_DEFAULT_PRNG_IMPL": "rbg"}
    then = {**MENV, "argv_xla_flags": ["--xla_gpu_all_reduce_combine_threshold_bytes=1024"]}
    said = drift(then, env, W)
    assert said and "--xla arguments differ" in said[0]
    now = Workload("/p/train.py", None, ("--xla_gpu_all_reduce_combine_threshold_bytes=1024",))
    assert drift(then, env, now) == []


def test_only_key_changing_jax_variables_are_drift():
    env = {"JAX_DEFAULT_PRNG_IMPL": "rbg", "JAX_LOGGING_LEVEL": "DEBUG", "JAX_LOG_COMPILES": "1"}
    assert drift(MENV, env, W) == []
    said = drift(MENV, {"JAX_DEFAULT_PRNG_IMPL": "threefry2x32"}, W)
    assert said == [("JAX_DEFAULT_PRNG_IMPL=threefry2x32 is set now, JAX_DEFAULT_PRNG_IMPL=rbg in "
                     "the prewarm run")]
    # A secret the manifest never held (redacted) cannot be compared: not drift.
    menv = {**MENV, "jax_variables": {**MENV["jax_variables"], "JAX_SOME_TOKEN": REDACTED}}
    assert drift(menv, {"JAX_DEFAULT_PRNG_IMPL": "rbg", "JAX_SOME_TOKEN": "s3cret"}, W) == []


def test_prewarms_jax_variables_never_override_the_users_own(tmp_path):
    menv = {**MENV, "jax_variables": {"JAX_DEFAULT_PRNG_IMPL": "rbg", "JAX_THREEFRY_PARTITIONABLE": "1"}}
    child = nsys_environment(menv, {"JAX_DEFAULT_PRNG_IMPL": "unsafe_rbg"}, str(tmp_path))
    assert child.env["JAX_DEFAULT_PRNG_IMPL"] == "unsafe_rbg"  # the user's (--force run)
    assert child.env["JAX_THREEFRY_PARTITIONABLE"] == "1"  # the prewarm's, where the user set none
    assert child.env["JAX_COMPILATION_CACHE_EXPECT_PGLE"] == "true"
    assert child.env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path)


def test_a_rank_range_profiles_both_its_ends():
    # `pgle nsys --ranks 0-3` profiles ranks 0, 1, 2 and 3 (a range names its last rank too).
    assert parse_ranks("0-3") == (0, 1, 2, 3)
    assert parse_ranks("2-2,8, 5-6") == (2, 5, 6, 8)
    for bad in ("3-1", "", "-1", "a-b"):
        with pytest.raises(BadInput, match="is not a list of ranks"):
            parse_ranks(bad)
