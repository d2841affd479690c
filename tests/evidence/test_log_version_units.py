"""`log_version.infer` and `Inference` on the wordings the scanner records (issue 37's survivors):
the prefix style, the clone and candidate modules as clues, a source line the lane never saw
(or line 0: no line known), the matches bounded by the clues, and how the range is said and
compared. The wordings are those of the lane's captures (tests/data/xla_gpu/<jax>/); the
scanner's side of them is in test_version_rules.py and test_version_inference.py."""

from __future__ import annotations

from helpers.pgle_testing import REPO
from pgle.evidence import log_version
from pgle.evidence.log_version import Inference, infer
from pgle.evidence.xla_log import LogScanner

DATA = REPO / "tests" / "data" / "xla_gpu"


def test_the_prefix_style_is_a_clue():
    assert (infer({"prefix": "tsl"}).low, infer({"prefix": "tsl"}).high) == (None, (0, 7, 1))
    absl = infer({"prefix": "absl", "checker_prefix": "absl"})
    assert (absl.low, absl.high) == ((0, 7, 1), None)
    assert absl.clues == ("the absl log prefix (jax >= 0.7.2)",)
    # A prefix recorded empty says nothing.
    assert infer({"prefix": ""}) == Inference(None, None, (), ())


def test_the_prefix_bounds_the_versions_the_line_numbers_match():
    # The fingerprint line is line 454 in jax 0.5.0, 0.7.2 and 0.8.3; the tsl prefix ends at
    # 0.7.0, the absl one begins at 0.7.2.
    assert infer({"fingerprint": 454}).matches == ("0.5.0", "0.7.2", "0.8.3")
    assert infer({"fingerprint": 454, "prefix": "tsl"}).matches == ("0.5.0",)
    assert infer({"fingerprint": 454, "prefix": "absl"}).matches == ("0.7.2", "0.8.3")


def test_clone_and_candidate_modules_are_clues():
    clones = infer({}, clones=True)
    assert (clones.low, clones.high) == ((0, 7, 1), (0, 9, 1))
    assert clones.clues == ("<module>-clone modules (jax 0.7.2-0.8.3)",)
    candidates = infer({}, candidates=True)
    assert (candidates.low, candidates.high) == ((0, 10, 3), None)
    assert candidates.clues == ("autotuner candidate modules (jax >= 0.11)",)
    assert infer({"fingerprint": 454}, clones=True).matches == ("0.7.2", "0.8.3")
    assert infer({"fingerprint": 454}, candidates=True).matches == ()


def test_the_clues_of_a_real_log_give_its_range():
    # A 0.8.3 log with its combiner's clones, its line numbers moved: the clues alone date it.
    ev = LogScanner().scan_file(DATA / "0.8.3" / "good-pbtxt.log")
    wording = {k: (v + 5000 if isinstance(v, int) else v) for k, v in ev.wording.items()}
    got = infer(wording, clones=True)
    assert got.matches == () and (got.low, got.high) == ((0, 7, 1), (0, 9, 1))


def test_a_source_line_no_captured_version_prints_pins_none():
    # Line 1 of gpu_hlo_schedule.cc is no version's fingerprint line: no lane version matches,
    # though the checker's line alone would match nine.
    assert infer({"checker_found": 192, "fingerprint": 1}).matches == ()
    # Line 0 is no line (a prefix whose number was not read): it is left out.
    assert infer({"checker_found": 192, "fingerprint": 0}).matches == infer(
        {"checker_found": 192}).matches != ()


def test_describe_says_what_it_knows():
    assert infer({}).describe() == "an unknown jax version (no telling wording in the log)"
    four = infer({"prefix": "absl", "using_fdo": 0, "parse_failed": 0, "fdo_unparsable": 0})
    assert len(four.clues) == 4
    assert four.describe() == (
        "jax >= 0.7.1 (from \"Using PGLE profile from fdo_profile\" (jax >= 0.5.1); "
        "\"Tried but failed to parse PGLE proto\" (jax >= 0.5.1); "
        "\"Unable to parse fdo_profile\" (jax >= 0.5.1))")
    pinned = infer({"fingerprint": 454, "prefix": "absl"})
    assert pinned.describe() == (
        "jax 0.7.2 or 0.8.3 (the log's source line numbers match the lane's capture)")


def test_since_is_true_false_or_unknown():
    first, last_before = (0, 10, 2), (0, 9, 2)
    assert infer({"prefix": "tsl"}).since(first, last_before) is False
    assert infer({"sol_fallback": 0}).since(first, last_before) is None  # >= 0.9.3: 0.10 or not
    assert infer({}, candidates=True).since(first, last_before) is True
    assert infer({"prefix": "absl"}).since(first, last_before) is None
    assert infer({}).since(first, last_before) is None
    # Pinned by line numbers: the lane versions decide.
    assert infer({"sol_fallback": 506}).since(first, last_before) is True
    assert infer({"fingerprint": 454, "prefix": "tsl"}).since(first, last_before) is False
    assert infer({"fingerprint": 454}).since(first, last_before) is False
    assert log_version.Inference((0, 5, 1), (0, 7, 0), (), ()).since((0, 7, 2), (0, 7, 0)) is False
