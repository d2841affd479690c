"""Store policies at their edges (pgle/store/policy.py; the survivors of its first mutmut run,
docs/development.md): `keep:1` and `merge:1` are the smallest, `p100` the largest percentile, a
given percentile is kept, each policy reads back as written, and a wrong one is one sentence with
the forms that work."""

from __future__ import annotations

import pytest

from pgle.errors import BadInput
from pgle.store.policy import DEFAULT, Policy, parse_policy


@pytest.mark.parametrize("text, policy, shown", [
    ("replace", Policy(keep=1, merge=False), "replace"),
    ("keep:1", Policy(keep=1, merge=False), "replace"),
    ("keep:3", Policy(keep=3, merge=False), "keep:3"),
    (None, Policy(keep=3, merge=False), "keep:3"),
    (" KEEP:12 ", Policy(keep=12, merge=False), "keep:12"),
    ("merge:1", Policy(keep=1, merge=True, percentile=90), "merge:1:p90"),
    ("merge:5", Policy(keep=5, merge=True, percentile=90), "merge:5:p90"),
    ("merge:5:p50", Policy(keep=5, merge=True, percentile=50), "merge:5:p50"),
    ("merge:2:p0", Policy(keep=2, merge=True, percentile=0), "merge:2:p0"),
    ("merge:2:p100", Policy(keep=2, merge=True, percentile=100), "merge:2:p100"),
])
def test_policies_parse_and_read_back(text, policy, shown):
    got = parse_policy(text)
    assert got == policy and got.merge is policy.merge
    assert str(got) == shown and parse_policy(shown) == got
    assert DEFAULT == "keep:3"


@pytest.mark.parametrize("text", ["keep:0", "merge:0", "merge:2:p101", "merge:2:p", "keep",
                                  "keep:-1", "merge:2:p1000", "newest", ""])
def test_wrong_policies_are_one_sentence_with_the_forms_that_work(text):
    if text == "":
        assert parse_policy(text) == parse_policy(DEFAULT)  # empty: the default
        return
    with pytest.raises(BadInput) as e:
        parse_policy(text)
    assert e.value.message == f"unknown store policy '{text}'."
    assert e.value.hint == "Use replace, keep:N or merge:N[:pP] (for example keep:3 or merge:5:p90)."
