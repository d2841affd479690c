"""Rules of pgle.evidence that run once, at import, or that only a command's subprocess reached
(issue 37), called in process: the words of XLA_FLAGS and argv that enter JAX's cache key (what
`pgle nsys` compares), the version range a log's wording proves in words, the line grid of
jax's log lines read from its text, and the events file's field checks (a run folder is
untrusted input: a field of the wrong type rejects its record). mutmut mutates a function in
the test process only: a table built at import is built before any mutant is active, so these
tests build them again."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from pgle.evidence import event_kinds, log_version
from pgle.evidence.jax_log import key_flag_words
from pgle.evidence.log_version import Inference, span


def test_the_flag_words_that_enter_the_cache_key():
    flags = ("--xla_gpu_enable_latency_hiding_scheduler=true  --xla_dump_to=/tmp/d "
             "--xla_gpu_per_fusion_autotune_cache_dir=/c --xla_gpu_cuda_data_dir=/cuda")
    argv = ["train.py", "--xla_gpu_autotune_level=0", "--lr", "--xla_dump_hlo_as_text",
            "-xla_no_dashes"]
    # jax 0.10 keeps the autotune cache's path in the key; 0.11 (and an unknown version:
    # the newest rules) leaves it out; dump flags never enter it
    assert key_flag_words(flags, argv, (0, 10, 2)) == [
        "--xla_gpu_autotune_level=0", "--xla_gpu_enable_latency_hiding_scheduler=true",
        "--xla_gpu_per_fusion_autotune_cache_dir=/c"]
    assert key_flag_words(flags, argv) == key_flag_words(flags, argv, (0, 11, 0)) == [
        "--xla_gpu_autotune_level=0", "--xla_gpu_enable_latency_hiding_scheduler=true"]
    assert key_flag_words(None) == [] and key_flag_words("", ["--xla_a=1"]) == ["--xla_a=1"]
    # a flag written without its dashes or its value is still the flag
    assert key_flag_words("xla_dump_to=/d --xla_b xla_c=1") == ["--xla_b", "xla_c=1"]


def test_a_version_range_in_words():
    assert span((0, 7, 2), (0, 8, 3)) == "0.7.2-0.8.3"
    assert span((0, 10, 2), (0, 10, 2)) == "0.10.2"
    assert span((0, 7, 2), None) == ">= 0.7.2"
    assert span(None, (0, 7, 0)) == "<= 0.7.0"
    assert span(None, None) == "unknown"
    assert Inference((0, 7, 2), None, (), ("the absl log prefix (jax >= 0.7.2)",)).describe() \
        == "jax >= 0.7.2 (from the absl log prefix (jax >= 0.7.2))"


def test_the_line_grid_reads_as_its_text():
    text = (
        "\n             0.4.35   0.5.0\n"
        "using          370      371\n"
        "using_fdo  344/353        -\n"
        "\n"
        "             0.10.2\n"
        "using          392\n"
    )
    assert log_version._grid(text) == {
        "0.4.35": {"using": (370,), "using_fdo": (344, 353)},
        "0.5.0": {"using": (371,)},
        "0.10.2": {"using": (392,)},
    }
    assert log_version._grid(log_version._LINE_GRID) == log_version.LINES
    assert log_version.LINES["0.4.34"]["checker_found"] == (191,)
    assert "checker_found" not in log_version.LINES["0.4.38"]  # a "-" cell
    with pytest.raises(ValueError):  # a row with a cell too few
        log_version._grid("  0.4.35 0.5.0\nusing 370\n")


@pytest.mark.parametrize(("tp", "good", "bad"), [
    (Any, [None, 1, "x", [1]], []),
    (type(None), [None], [0, "", False]),
    (bool, [True, False], [0, 1, None, "true"]),
    (int, [0, -3, 1 << 40], [True, 1.0, "1", None]),
    (float, [0, 1.5, -2], [True, "1.5", None]),
    (str, ["", "x"], [b"x", 1, None]),
    (Literal["start", "stop"], ["start", "stop"], ["pause", 1, None]),
    (int | None, [None, 4], [4.5, "4", False]),
    (list[int], [[], [1, 2]], [[1, "2"], (1,), None, [True]]),
    (dict[str, int], [{}, {"a": 1}], [{"a": "1"}, {1: 1}, [], {"a": False}]),
    (list[dict[str, Any]] | None, [None, [{"a": [1]}], []], [[1], {"a": 1}]),
])
def test_each_field_check_takes_what_the_harness_writes(tp: Any, good: list, bad: list):
    check = event_kinds._check_of(tp)
    assert [v for v in good if check(v) is not True] == []
    assert [v for v in bad if check(v) is not False] == []


def test_a_kind_s_fields_are_its_dataclass_fields_with_their_checks():
    fields = event_kinds._fields_of(event_kinds.Exit)
    assert [(name, required) for name, _, required in fields] == [
        ("edges", False), ("code", False), ("error", False), ("interrupted", False)]
    checks = {name: check for name, check, _ in fields}
    assert checks["code"](3) and checks["code"](None) and not checks["code"](True)
    assert checks["interrupted"](True) and not checks["interrupted"](1)
    required = {name for name, _, req in event_kinds._fields_of(event_kinds.StepName) if req}
    assert required == {"id", "name"}
    assert event_kinds._fields_of(event_kinds.ScriptTrace)[1][0] == "call"
    with pytest.raises(TypeError, match=r"^no check for tuple\[int, \.\.\.\]$"):
        event_kinds._check_of(tuple[int, ...])  # no check for a type the schema never uses


def test_a_kind_s_class_is_a_frozen_keyword_only_dataclass_registered_by_its_kind():
    class Probe(event_kinds.Event, kind="h50_probe"):
        n: int = 0

    try:
        assert event_kinds.KINDS["h50_probe"] is Probe and Probe.KIND == "h50_probe"
        probe = Probe(t=1.0, n=2)
        assert probe.kind == "h50_probe" and probe.n == 2
        with pytest.raises(TypeError):
            Probe(2, t=1.0)  # type: ignore[misc]  # keyword-only, its own fields too
        with pytest.raises(AttributeError):
            probe.n = 3  # type: ignore[misc]  # frozen
    finally:
        event_kinds.KINDS.pop("h50_probe", None)

    class Unregistered(event_kinds.Event):
        pass

    assert Unregistered.KIND == "" and "" not in event_kinds.KINDS
