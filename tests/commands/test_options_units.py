"""The options every workflow is built from (pgle/commands/options.py), in process (issue 37):
each bad value is one line with exit 2 before anything runs, the defaults a user gets, which
option excludes which, and the window said in words before the run."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pgle.commands import options as o
from pgle.errors import EXIT_USAGE, BadInput
from pgle.evidence.schema import WindowSpec
from pgle.launch.workload import Workload


def refused(match: str, make, *args, **kw) -> BadInput:
    with pytest.raises(BadInput) as e:
        make(*args, **kw)
    assert re.search(match, e.value.message), e.value.message  # the hint comes apart
    assert e.value.exit_code == EXIT_USAGE and "\n" not in str(e.value)
    return e.value


# --- --steps and the window -----------------------------------------------------------------

def test_parse_steps():
    assert o.parse_steps("10:5") == (10, 5)
    assert o.parse_steps("0:1") == (0, 1)
    for text in ("10", "a:5", "10:", ":5", "1.5:2"):
        refused(rf"^--steps {text!r} is not START:COUNT \(e.g. 10:5\)\.$", o.parse_steps, text)
    for text in ("-1:5", "3:0", "3:-2"):
        refused(rf"^--steps {text!r} is not START:COUNT with START >= 0 and COUNT >= 1\.$",
                o.parse_steps, text)


def test_window_refuses_bad_values_and_two_windows():
    refused(r"^--trace-detail 'most': use one of pgle, full\.$", o.Window, detail="most")
    refused(r"^--trace-max-bytes -1: use a size >= 0 \(0: no bound\)\.$", o.Window, max_bytes=-1)
    refused(r"^--steps -1:2 is not START:COUNT with START >= 0 and COUNT >= 1\.$", o.Window,
            steps=(-1, 2))
    refused(r"^--steps 1:0 is not", o.Window, steps=(1, 0))
    refused(r"^--steps and --delay/--duration exclude each other: pick one window\.$", o.Window,
            steps=(1, 2), delay=0.0)
    refused(r"^--steps and --delay/--duration exclude", o.Window, steps=(1, 2), duration=3.0)
    refused(r"^--delay must be >= 0 and --duration > 0 seconds\.$", o.Window, delay=-0.5)
    refused(r"^--delay must be", o.Window, duration=0.0)
    refused(r"^--delay must be", o.Window, duration=-1.0)
    # The edges that are allowed.
    assert o.Window(max_bytes=0).max_bytes == 0
    assert o.Window(steps=(0, 1)).steps == (0, 1)
    assert o.Window(delay=0.0).mode == "time"
    assert o.Window(detail="full").detail == "full"
    assert o.Window(duration=0.5).duration == 0.5  # under a second is a window too


def test_window_defaults():
    w = o.Window()
    assert (w.steps, w.step_name, w.delay, w.duration) == (None, None, None, None)
    assert w.detail == "pgle" and w.max_bytes == 1536 * 1024 * 1024  # under protobuf's 2 GiB
    assert w.mode == "auto"


def test_window_modes_and_what_the_harness_gets(tmp_path):
    steps = o.Window(steps=(10, 5), step_name="train", detail="full", max_bytes=7)
    assert steps.mode == "steps"
    assert steps.spec(tmp_path) == WindowSpec("steps", str(tmp_path), start=10, count=5,
                                              step_name="train", detail="full", max_bytes=7)
    timed = o.Window(duration=4.0, step_name="s", max_bytes=9)
    assert timed.mode == "time"
    assert timed.spec(tmp_path) == WindowSpec("time", str(tmp_path), delay=0.0, duration=4.0,
                                              step_name="s", detail="pgle", max_bytes=9)
    assert o.Window(delay=1.0, detail="full").spec(tmp_path).detail == "full"
    assert o.Window(delay=2.5).spec(tmp_path) == WindowSpec(
        "time", str(tmp_path), delay=2.5, duration=None, max_bytes=o.DEFAULT_TRACE_MAX_BYTES)
    auto = o.Window(step_name="train")
    assert auto.spec(tmp_path) == WindowSpec(
        "auto", str(tmp_path), step_name="train", warmup=2, executions=5, max_seconds=30.0,
        detail="pgle", max_bytes=o.DEFAULT_TRACE_MAX_BYTES)


def test_the_window_in_words():
    assert o.Window(steps=(10, 5)).describe() == "steps 10..14"
    assert o.Window(steps=(0, 1), step_name="train").describe() == "steps 0..0 of 'train'"
    assert o.Window(delay=1.5, duration=2.0).describe() == "2 s from 1.5 s after the start"
    assert o.Window(delay=3.0).describe() == "to the end from 3 s after the start"
    assert o.Window(duration=2.0).describe() == "2 s from 0 s after the start"
    assert o.Window().describe() == (
        "steps 2..6 if the script marks them (jax.profiler.StepTraceAnnotation), else "
        "executions 2..6 of its step function (the jitted function that takes the most host "
        "time); at most 30 s, the rest of the run unprofiled")
    assert o.Window(step_name="train").describe().startswith(
        "steps named 'train' 2..6 if the script marks them")
    # The short form, once collect has said it in full.
    assert o.Window(steps=(10, 5)).short() == "steps 10..14"
    assert o.Window(duration=2.0).short() == "2 s from 0 s after the start"
    assert o.Window().short() == (
        "collect's window (steps 2..6, or executions 2..6 of the step function)")
    assert o.Window(step_name="t").short() == (
        "collect's window (steps named 't' 2..6, or executions 2..6 of the step function)")


# --- how the trace becomes a profile --------------------------------------------------------

def test_extraction_refuses_options_that_do_not_go_together():
    X = o.Extraction
    refused(r"^unknown converter 'xla': use jaxlib or pgle\.$", X, converter="xla")
    e = refused(r"^--per-module needs pgle's converter: jaxlib's pools every module into one "
                r"file\.$", X, per_module=True, converter="jaxlib")
    assert e.hint == "Drop --converter jaxlib."
    e = refused(r"^--stat applies to pgle's converter: jaxlib's always takes the mean\.$", X,
                stat="p90")
    assert e.hint == "Add --per-module or --converter pgle."
    refused(r"^--stat applies to pgle's converter", X, stat="median", converter="jaxlib")
    refused(r"^unknown statistic 'p101'\.$", X, stat="p101", per_module=True)
    refused(r"^--qualify is for a single file: a per-module directory already keeps each "
            r"module apart\.$", X, qualify=True, per_module=True)
    e = refused(r"^--qualify needs pgle's converter\.$", X, qualify=True)
    assert e.hint == "Add --converter pgle."
    refused(r"^--qualify needs", X, qualify=True, converter="jaxlib")
    refused(r"^unknown format 'json': use binary or text\.$", X, fmt="json", per_module=True)
    refused(r"^--format applies to --per-module directories: a single profile's format "
            r"follows its extension \(\.pb binary, \.pbtxt text\)\.$", X, fmt="binary")
    refused(r"^--format applies to --per-module", X, fmt="text", converter="pgle")


def test_extraction_defaults_and_what_each_choice_needs():
    d = o.Extraction()
    assert (d.per_module, d.stat, d.fmt, d.converter, d.qualify, d.keep_trace) == (
        False, None, None, None, False, True)
    assert not d.uses_pgle_converter and not d.needs_fingerprints
    per = o.Extraction(per_module=True, stat="p90", fmt="binary", converter="pgle")
    assert per.uses_pgle_converter and per.needs_fingerprints
    single = o.Extraction(converter="pgle", stat="max")
    assert single.uses_pgle_converter and not single.needs_fingerprints
    qualified = o.Extraction(converter="pgle", qualify=True)
    assert qualified.needs_fingerprints
    assert not o.Extraction(converter="jaxlib").uses_pgle_converter
    assert o.PER_MODULE_FORMAT == "text" and o.DEFAULT_STAT == "median"


# --- the verdict, auto PGLE -----------------------------------------------------------------

def test_verdict_options():
    V = o.VerdictOptions
    assert (V().min_coverage, V().require_applied, V().require) == (None, False, ())
    for bad in ("", "  "):
        refused(r"^--require needs a module name or glob \(e\.g\. 'jit_train_step\*'\)\.$", V,
                require=("jit_a", bad))
    refused(r"^--min-coverage 2 is not between 0 and 1\.$", V, min_coverage=2.0)
    refused(r"^--min-coverage -0\.1 is not between 0 and 1\.$", V, min_coverage=-0.1)
    refused(r"^--min-coverage 1\.001 is not", V, min_coverage=1.001)
    assert V(min_coverage=0.0).min_coverage == 0.0
    assert V(min_coverage=1.0, require=("jit_*",)).require == ("jit_*",)


def test_auto_pgle_options():
    A = o.AutoPgleOptions
    assert (A().runs, A().percentile, A().require_all, A().require) == (3, 90, False, ())
    refused(r"^--runs 0: auto PGLE needs at least 1 profiled execution \(0 turns it off\)\.$",
            A, runs=0)
    refused(r"^--runs -2: auto PGLE", A, runs=-2)
    assert A(runs=1).runs == 1
    refused(r"^--percentile 101 is outside 0\.\.100; jaxlib would return an empty profile and "
            r"nothing would be optimized\.$", A, percentile=101)
    refused(r"^--percentile -1 is outside", A, percentile=-1)
    assert A(percentile=0).percentile == 0 and A(percentile=100).percentile == 100


# --- the store ------------------------------------------------------------------------------

def test_store_options(tmp_path):
    S = o.StoreOptions
    assert S(str(tmp_path)).policy == "replace" and not S(str(tmp_path)).serve
    refused(r"unknown|policy", S, str(tmp_path), policy="keep:0")
    assert S(str(tmp_path), policy="merge:3:p50").policy == "merge:3:p50"
    refused(r"^--store needs a folder or a gs:// path\.$", S, "")
    refused(r"^--store needs a folder", S, "   ")
    refused(r"^--store gs://: remote stores are gs://bucket/path\.$", S, "gs://")
    refused(r"^--store s3://b/p: remote stores are gs://bucket/path\.$", S, "s3://b/p")
    # A gs:// store is never looked for on the local disk.
    assert S("gs://bucket/p", serve=True).path == "gs://bucket/p"
    (tmp_path / "file").write_text("x")
    refused(rf"^--store {tmp_path / 'file'} exists and is not a directory\.$", S,
            str(tmp_path / "file"))
    # run serves from a store that must exist; collect creates it (no folder made here).
    gone = tmp_path / "a" / "b" / "store"
    e = refused(rf"^--store {gone} does not exist\.$", S, str(gone), serve=True)
    assert e.hint == "`pgle collect --store` (or `pgle store add`) creates it."
    assert S(str(gone)).path == str(gone) and not gone.exists() and not gone.parent.exists()
    assert S(str(tmp_path), serve=True).serve


@pytest.mark.unprivileged
@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere (CI reruns "
                                              "`-m unprivileged` as a non-root user)")
def test_store_options_in_a_folder_nobody_may_write(tmp_path):
    ro = tmp_path / "ro"
    (ro / "store").mkdir(parents=True)
    ro.chmod(0o555)
    (ro / "store").chmod(0o555)
    try:
        refused(r"cannot be created: .*ro is not writable\.$", o.StoreOptions,
                str(ro / "new" / "store"))
        refused(r"^--store .*store is not writable\.$", o.StoreOptions, str(ro / "store"))
        assert o.StoreOptions(str(ro / "store"), serve=True).serve  # reading needs no write
    finally:
        (ro / "store").chmod(0o755)
        ro.chmod(0o755)


@pytest.mark.skipif(os.geteuid() != 0, reason="as a non-root user the test above runs")
def test_store_options_for_a_real_user_who_may_not_write(tmp_path):
    """Under root, the same refusals for a user who may not write: os.access (access(2)) asks
    the kernel with the process's real user id, so the test makes its real uid nobody's while
    its effective uid stays root (which restores it) and the folders stay root's 0o755."""
    (tmp_path / "ro" / "store").mkdir(parents=True)
    ro = tmp_path / "ro"
    nobody = 65534
    os.setresuid(nobody, 0, 0)
    try:
        assert not os.access(ro, os.W_OK)  # the kernel's answer for that user
        e = refused(r"^--store .* cannot be created: .* is not writable\.$", o.StoreOptions,
                    str(ro / "new" / "store"))
        assert e.message == (f"--store {ro / 'new' / 'store'} cannot be created: {ro} is not "
                             "writable.")
        e = refused(r"^--store .* is not writable\.$", o.StoreOptions, str(ro / "store"))
        assert e.message == f"--store {ro / 'store'} is not writable."
        assert o.StoreOptions(str(ro / "store"), serve=True).serve  # reading needs no write
    finally:
        os.setresuid(0, 0, 0)
    assert os.getresuid() == (0, 0, 0)


# --- collect --------------------------------------------------------------------------------

def test_collect_options(tmp_path):
    w = Workload(str(tmp_path / "train.py"), None, ())
    c = o.CollectOptions(w, None)
    assert c.merge_percentile == 90 and not c.per_module and not c.force and c.store is None
    assert c.window == o.Window() and c.extraction == o.Extraction()
    refused(r"^merge percentile 101 is outside 0\.\.100\.$", o.CollectOptions, w, None,
            merge_percentile=101)
    refused(r"^merge percentile -1 is outside", o.CollectOptions, w, None, merge_percentile=-1)
    assert o.CollectOptions(w, None, merge_percentile=0).merge_percentile == 0
    assert o.CollectOptions(w, None, merge_percentile=100).merge_percentile == 100
    # A store two folders down: its nearest folder that exists is tmp_path, found by walking
    # up (stopping at the first folder that exists: a walk past it would never end at `/`).
    store = o.StoreOptions(str(tmp_path / "new" / "store"))
    refused(r"^--store keeps per-module profiles \(keyed by fingerprint\): add --per-module\.$",
            o.CollectOptions, w, None, store=store)
    per = o.CollectOptions(w, "out", extraction=o.Extraction(per_module=True), store=store)
    assert per.per_module and per.store == store
    # Frozen: a workflow never changes the options it was given.
    with pytest.raises(AttributeError):
        per.force = True  # type: ignore[misc]
    assert Path(per.output or "").name == "out"
