"""Issue 31 (low): a Python caller's wrong type is one PgleError line, never a traceback.

docs/reliability.md promises no case prints a traceback; an int for a path, a list for a
string, or None where a value is needed used to raise TypeError or AttributeError from deep
inside (six cases in the hostile round). Each pgle function is called with each wrong type.
"""

from __future__ import annotations

import inspect

import pytest

import pgle
import pgle.api as api

WRONG = [5, ["a"], None, 3.5, {"a": 1}]
COMMANDS = [n for n in pgle.__all__ if inspect.isfunction(getattr(api, n, None))]


@pytest.mark.parametrize("name", COMMANDS)
def test_every_wrong_type_is_one_pgle_error(name, tmp_path):
    fn = getattr(pgle, name)
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "environ"]
    required = {p.name: str(tmp_path / "missing.pb") for p in params
                if p.default is inspect.Parameter.empty}
    for p in params:
        for wrong in WRONG:
            try:
                fn(**{**required, p.name: wrong})
            except pgle.PgleError as e:
                assert "\n" not in str(e)
            # anything else propagates: the test fails with the traceback it would have shown


def test_the_error_names_the_keyword_and_the_cli_code():
    with pytest.raises(pgle.PgleError, match=r"pgle\.inspect: profile must be a str \(or a "
                                             r"path\), not int 5\.") as e:
        pgle.inspect(5)
    assert e.value.exit_code == 2
    with pytest.raises(pgle.PgleError, match="top must be a int, not list"):
        pgle.inspect("x.pb", top=[3])


@pytest.mark.parametrize("call", [
    lambda: pgle.read_profile(5), lambda: pgle.read_profile(None), lambda: pgle.read_profile(["a"]),
    lambda: pgle.load_profile_source(7), lambda: pgle.write_profile(None, "x.pb"),
    lambda: pgle.write_profile(b"", 5)])
def test_the_profile_functions_take_wrong_types_in_one_line(call):
    with pytest.raises(pgle.PgleError) as e:
        call()
    assert e.value.exit_code == 2 and "\n" not in str(e.value)
