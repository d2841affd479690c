"""Which cache entries a prune selects, which flags a jax leaves out of its cache key, and when
a prewarm on another host still counts as running (docs/reference/cli.md, `pgle cache`)."""

from __future__ import annotations

import socket
import time

from pgle.cache import manifest
from pgle.cache.entries import Entry, select
from pgle.cache.key_rules import key_excluded_flags, key_holds_cache_dir


def entry(module: str, age_s: float, now: float) -> Entry:
    return Entry(module, f"{module}-key", 10, now - age_s, False, manifest.ROLE_PLAIN)


def test_prune_selects_by_module_glob_and_age(tmp_path):
    now = 1_800_000_000.0
    es = [entry("jit_train_step", 10 * 86400, now), entry("jit_eval_step", 10 * 86400, now),
          entry("jit_train_step", 60, now)]
    got = select(str(tmp_path), es, modules=("jit_train*",), now=now)
    assert [e.module for e in got] == ["jit_train_step", "jit_train_step"]
    got = select(str(tmp_path), es, modules=("jit_train*",), older_than=86400, now=now)
    assert [(e.module, e.mtime) for e in got] == [("jit_train_step", now - 10 * 86400)]
    assert select(str(tmp_path), es, modules=("nothing*",), now=now) == []


def test_key_excluded_flags_change_at_jax_0_4_36_and_0_11():
    assert "xla_gpu_experimental_autotune_cache_mode" in key_excluded_flags((0, 4, 36))
    assert "xla_gpu_experimental_autotune_cache_mode" not in key_excluded_flags((0, 4, 35))
    assert "xla_gpu_per_fusion_autotune_cache_dir" in key_excluded_flags((0, 11, 0))
    assert "xla_gpu_per_fusion_autotune_cache_dir" not in key_excluded_flags((0, 10, 2))
    assert "xla_dump_to" in key_excluded_flags((0, 4, 30))


def test_the_key_holds_the_cache_path_from_jax_0_4_36_to_0_10_2():
    assert key_holds_cache_dir((0, 4, 36), None) is True
    assert key_holds_cache_dir((0, 10, 2), None) is True
    assert key_holds_cache_dir((0, 4, 35), None) is False
    assert key_holds_cache_dir((0, 11, 0), None) is False
    assert key_holds_cache_dir((0, 10, 2), "none") is False


def test_a_prewarm_on_another_host_counts_as_running_until_stale():
    other = "not-" + socket.gethostname()
    fresh = {"state": "in_progress", "host": other, "pid": 1, "started": time.time() - 60}
    stale = {"state": "in_progress", "host": other, "pid": 1,
             "started": time.time() - manifest.STALE_REMOTE_RUN_SECS - 60}
    done = {"state": "finished", "host": other, "pid": 1, "started": time.time()}
    assert manifest.runs_in_progress({"runs": [fresh, stale, done]}) == [fresh]
