"""The held workload's side of `--gather kv` (pgle.launch.handoff, jax_internals): an answer
file as the rank writes it, read back by pgle; and jax.distributed's shutdown held back until
pgle's exchange is over, on a real jax.distributed service of one process."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from helpers.pgle_testing import script_json
from pgle.launch import handoff


def test_an_answer_is_read_back_as_written_and_anything_else_as_nothing() -> None:
    written = {"fetched": {"k0": "/run/got-0"}, "errors": ["fetch k1: TimeoutError: late"]}
    assert handoff.read_answer(json.dumps(written).encode()) == written
    # what a rank's answer may hold that pgle does not take as it is: strings only, no more
    odd = {"fetched": {"k0": 7}, "errors": [1, "x"], "extra": True}
    assert handoff.read_answer(json.dumps(odd).encode()) == {"fetched": {"k0": "7"},
                                                             "errors": ["1", "x"]}
    assert handoff.read_answer(b'{"fetched": ["k0"], "errors": "x"}') == {"fetched": {},
                                                                          "errors": []}
    assert handoff.read_answer(b"{}") == {"fetched": {}, "errors": []}
    assert handoff.read_answer(b'["fetched"]') is None
    with pytest.raises(ValueError):
        handoff.read_answer(b'{"fetched": ')  # written halfway


def test_a_request_keeps_only_well_formed_fetches_and_reads_absent_fields_empty() -> None:
    raw = {"publish": {"k0": "/run/f"}, "timeout_s": 5, "final": 1,
           "fetch": [{"key": "k1", "to": "/run/g"}, {"key": "k2"}, {"to": "/run/h"},
                     ["key", "to"], "k3"]}
    assert handoff.read_request(json.dumps(raw).encode()) == {
        "publish": {"k0": "/run/f"}, "fetch": [{"key": "k1", "to": "/run/g"}],
        "timeout_s": 5.0, "final": True}
    empty = {"publish": {}, "fetch": [], "timeout_s": 0.0, "final": False}
    assert handoff.read_request(b"{}") == empty
    assert handoff.read_request(b'{"fetch": {"key": "k", "to": "t"}, "timeout_s": "5"}') == empty
    assert handoff.read_request(b"[1]") is None


DEFERRED = textwrap.dedent("""
    import json, socket, sys
    sys.modules["jax"] = None  # first, a process whose jax cannot be imported
    from pgle.launch import jax_internals
    out = {"without_jax": jax_internals.defer_distributed_shutdown()}
    jax_internals.release_distributed_shutdown()  # nothing deferred: nothing to release
    del sys.modules["jax"]
    import jax
    from jax._src import distributed
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1,
                               process_id=0)
    out["deferred"] = jax_internals.defer_distributed_shutdown()
    out["again"] = jax_internals.defer_distributed_shutdown()
    if sys.argv[1] == "asked":
        jax.distributed.shutdown()  # the workload's own, before pgle's exchange is over
        out["up_after_its_shutdown"] = distributed.global_state.client is not None
        jax_internals.release_distributed_shutdown()
        out["up_after_release"] = distributed.global_state.client is not None
    else:
        jax_internals.release_distributed_shutdown()  # the exchange is over first
        out["up_after_release"] = distributed.global_state.client is not None
        jax.distributed.shutdown()
        out["up_after_its_shutdown"] = distributed.global_state.client is not None
    jax_internals.release_distributed_shutdown()  # once only
    print(json.dumps(out))
""")


def _deferred(tmp_path: Path, order: str) -> dict[str, bool]:
    out: dict[str, bool] = script_json(tmp_path, "deferred.py", DEFERRED, order, timeout=120)
    return out


def test_the_workloads_shutdown_waits_for_the_release(tmp_path: Path) -> None:
    """Deferred, jax.distributed.shutdown() only records that it was asked: the client stays
    up for pgle's exchange, and the release does the shutdown asked meanwhile. Deferring
    again is a no-op that says it is deferred; a process without jax defers nothing."""
    assert _deferred(tmp_path, "asked") == {
        "without_jax": False, "deferred": True, "again": True,
        "up_after_its_shutdown": True, "up_after_release": False}


def test_a_shutdown_after_the_release_goes_through_at_once(tmp_path: Path) -> None:
    """The exchange over before the workload's end: the release shuts nothing down (nothing
    was asked), and the workload's own shutdown then goes through as jax's."""
    out = _deferred(tmp_path, "after")
    assert (out["up_after_release"], out["up_after_its_shutdown"]) == (True, False), out
