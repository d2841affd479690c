"""Tracebacks show the workload's frames, never pgle's (pgle.launch.tracebacks), checked in
process on real exceptions raised through a real frame of pgle's launch folder and of runpy
(issue 37: it ran only inside workload processes)."""

from __future__ import annotations

import os
import runpy
import sys
import threading
import traceback

from helpers.deadline import returns_within
from pgle.launch import tracebacks

LAUNCH = os.path.dirname(os.path.abspath(tracebacks.__file__))


def test_pgles_and_runpys_frames_are_told_apart():
    assert tracebacks.pgle_frame(os.path.join(LAUNCH, "harness.py"))
    assert tracebacks.pgle_frame(os.path.join(LAUNCH, "boot", "sitecustomize.py"))
    assert tracebacks.pgle_frame(os.path.abspath(runpy.__file__))
    assert tracebacks.pgle_frame("<frozen runpy>")
    assert not tracebacks.pgle_frame(os.path.join(os.path.dirname(LAUNCH), "evidence", "x.py"))
    assert not tracebacks.pgle_frame("/home/u/train.py")
    assert not tracebacks.pgle_frame("<string>") and not tracebacks.pgle_frame("")
    assert tracebacks.pgle_frame(os.path.join(LAUNCH, "..", "launch", "harness.py"))


def test_a_pseudo_file_is_never_pgles_whatever_the_working_folder(monkeypatch):
    monkeypatch.chdir(LAUNCH)  # `<string>` made absolute would land in pgle's folder
    assert not tracebacks.pgle_frame("<string>") and not tracebacks.pgle_frame("<stdin>")
    assert tracebacks.pgle_frame("harness.py")  # a relative name is resolved


def _raise_through_pgle(exc: BaseException) -> BaseException:
    """`exc` raised by user code called from a function compiled as one of pgle's files."""
    def user_code():
        raise exc

    ns = {"user_code": user_code}
    code = compile("def through():\n    user_code()\n", os.path.join(LAUNCH, "harness.py"), "exec")
    exec(code, ns)
    try:
        ns["through"]()
    except BaseException as e:  # noqa: BLE001
        return e
    raise AssertionError("not raised")


def _files(tb) -> list[str]:
    return [os.path.basename(f.filename) for f in traceback.extract_tb(tb)]


def test_pgles_frames_are_dropped_from_an_exception_and_its_chain():
    cause = _raise_through_pgle(KeyError("cause"))
    context = _raise_through_pgle(ValueError("context"))
    e = _raise_through_pgle(RuntimeError("boom"))
    e.__cause__, e.__context__ = cause, context
    e.__suppress_context__ = True
    assert "harness.py" in _files(e.__traceback__)
    assert _files(tracebacks.without_pgle(e.__traceback__)) == [
        "test_tracebacks_units.py", "test_tracebacks_units.py"]  # the order kept
    tracebacks._clean(e)
    for x in (e, cause):
        assert "harness.py" not in _files(x.__traceback__)
    # A context that is not the cause is cleaned too; one that is the cause once only.
    e2 = _raise_through_pgle(RuntimeError("again"))
    ctx = _raise_through_pgle(ValueError("ctx"))
    e2.__context__ = ctx
    tracebacks._clean(e2)
    assert "harness.py" not in _files(ctx.__traceback__)
    loop = _raise_through_pgle(RuntimeError("loop"))
    loop.__cause__ = loop
    with returns_within(10):  # an endless loop fails here, not at mutmut's time limit
        tracebacks._clean(loop)  # a cycle ends
    a, b = _raise_through_pgle(ValueError("a")), _raise_through_pgle(ValueError("b"))
    a.__context__, b.__context__ = b, a  # a cycle through the contexts ends too
    with returns_within(10):
        tracebacks._clean(a)
    assert "harness.py" not in _files(a.__traceback__) + _files(b.__traceback__)
    assert tracebacks.without_pgle(None) is None


def test_the_hooks_print_the_users_traceback(monkeypatch, capsys):
    monkeypatch.setattr(tracebacks, "_installed", [])
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)
    tracebacks.install()
    hook, thread_hook = sys.excepthook, threading.excepthook
    tracebacks.install()  # idempotent
    assert sys.excepthook is hook and threading.excepthook is thread_hook
    assert tracebacks._installed == [(sys.__excepthook__, threading.__excepthook__)]
    e = _raise_through_pgle(RuntimeError("main thread"))
    sys.excepthook(type(e), e, e.__traceback__)
    err = capsys.readouterr().err
    assert "RuntimeError: main thread" in err and "harness.py" not in err
    assert err.count("test_tracebacks_units.py") == 2

    def worker():
        raise _raise_through_pgle(ValueError("in a thread"))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    err = capsys.readouterr().err
    assert "ValueError: in a thread" in err and "harness.py" not in err
    assert "Exception in thread" in err
