"""Inside the workload: the job's files travel through jax.distributed's key-value store.

A multi-process job whose ranks share no folder (`--gather kv`) still needs rank 0 to see
every rank's report and profile, and every rank to see the job's report and merged profile
(pgle.jobs.kv). The only channel every rank has is the one the workload itself opened:
`jax.distributed.initialize()`'s coordination service. It lives as long as the workload's
processes, so the harness keeps each process alive at its very end, after the workload's
last line and its exit record but before jax's own teardown (`jax.distributed.shutdown()`,
the workload's or jax's atexit, is deferred until then; pgle.launch.jax_internals), and
does what this rank's pgle asks, in rounds:

    <home>/handoff/request-<n>.json   pgle: {"publish": {key: file}, "fetch": [{"key", "to"}],
                                              "timeout_s": T, "final": bool}
    <home>/handoff/answer-<n>.json    harness: {"fetched": {key: file}, "errors": [...]}

Publishing is `key_value_set_bytes`, fetching `blocking_key_value_get_bytes` (which waits for
the key, at most T). After the final round the process goes on and ends as it would have.
pgle's own death ends the wait (the parent watch kills the process group), and so does
`hold_timeout_s` without a request.

Standard library only, plus jax (already imported by the workload).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TypedDict

from pgle.evidence import schema

POLL_S = 0.02
# A fetch waits in slices this long: the blocking get is one C++ call that Python's SIGINT
# handler cannot interrupt (jax 0.4.35-0.12), so Ctrl-C on a held rank lands between slices
# instead of after the whole gather timeout (issue 37: it took the full 30 s, then some).
FETCH_SLICE_S = 0.5


class FetchItem(TypedDict):
    key: str
    to: str  # where the harness writes the value


class Request(TypedDict):
    """request-<n>.json, written by pgle (pgle.jobs.kv.HeldExchange)."""

    publish: dict[str, str]  # key -> the file holding its value
    fetch: list[FetchItem]
    timeout_s: float
    final: bool


class Answer(TypedDict):
    """answer-<n>.json, written by the harness."""

    fetched: dict[str, str]  # key -> the file its value was written to
    errors: list[str]


def _str_map(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def read_request(raw: bytes) -> Request | None:
    """A request file's content as a Request (absent or mistyped fields empty), None when it is
    not a JSON object; ValueError when it is not JSON."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        return None
    fetch = data.get("fetch")
    items: list[FetchItem] = [
        {"key": str(item["key"]), "to": str(item["to"])}
        for item in (fetch if isinstance(fetch, list) else [])
        if isinstance(item, dict) and "key" in item and "to" in item
    ]
    timeout_s = data.get("timeout_s")
    return {
        "publish": _str_map(data.get("publish")),
        "fetch": items,
        "timeout_s": float(timeout_s) if isinstance(timeout_s, (int, float)) else 0.0,
        "final": bool(data.get("final")),
    }


def read_answer(raw: bytes) -> Answer | None:
    """An answer file's content as an Answer, None when it is not a JSON object; ValueError
    when it is not JSON."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        return None
    errors = data.get("errors")
    return {
        "fetched": _str_map(data.get("fetched")),
        "errors": [str(e) for e in errors] if isinstance(errors, list) else [],
    }


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()


def _write_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _wait_for(path: str, deadline: float) -> Request | None:
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as f:
                return read_request(f.read())
        except FileNotFoundError:
            time.sleep(POLL_S)
        except (OSError, ValueError):
            time.sleep(POLL_S)  # being written (it is renamed into place): read again
    return None


def hold(
    home: str, write: Callable[..., None], flush: Callable[[], None], timeout_s: float
) -> bool:
    """Wait for pgle's requests and serve them; False when the process has no jax.distributed
    client (nothing can travel: pgle says so)."""
    from pgle.launch import jax_internals

    found = jax_internals.kv_client()
    if found is None:
        return False
    client, process_id, process_count = found
    folder = os.path.join(home, schema.HANDOFF_DIR)
    os.makedirs(folder, exist_ok=True)
    _flush_streams()
    write(schema.HOLD, process_index=process_id, process_count=process_count, dir=folder)
    flush()
    error = None
    deadline = time.monotonic() + timeout_s
    n = 0
    try:
        while True:
            request = _wait_for(os.path.join(folder, f"request-{n}.json"), deadline)
            if request is None:
                error = f"pgle asked nothing within {timeout_s:g} s"
                break
            answer = _serve(client, request)
            _write_atomic(os.path.join(folder, f"answer-{n}.json"), json.dumps(answer).encode())
            if request["final"]:
                break
            n += 1
            deadline = time.monotonic() + timeout_s
    except KeyboardInterrupt:
        error = "interrupted"
        raise
    finally:
        write(schema.RELEASED, error=error)
        flush()
        jax_internals.release_distributed_shutdown()
    return True


def _serve(client: Any, request: Request) -> Answer:
    errors: list[str] = []
    fetched: dict[str, str] = {}
    for key, path in request["publish"].items():
        try:
            with open(path, "rb") as f:
                client.key_value_set_bytes(str(key), f.read())
        except Exception as e:  # the coordinator gone, a key set twice: pgle reports it
            errors.append(f"publish {key}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    deadline = time.monotonic() + (request["timeout_s"] or 60.0)
    for item in request["fetch"]:
        key, to = item["key"], item["to"]
        try:
            data = _fetch(client, key, deadline)
        except Exception as e:
            errors.append(f"fetch {key}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            continue
        _write_atomic(to, bytes(data))
        fetched[key] = to
    return {"fetched": fetched, "errors": errors}


def _fetch(client: Any, key: str, deadline: float) -> Any:
    """The key's value, waiting until `deadline` in slices of FETCH_SLICE_S (a KeyboardInterrupt
    is raised between them); TimeoutError when the key never came, or the error of a get
    that failed at once."""
    began = time.monotonic()
    while True:
        left = deadline - time.monotonic()
        slice_s = min(FETCH_SLICE_S, max(0.001, left))
        started = time.monotonic()
        try:
            return client.blocking_key_value_get_bytes(key, max(1, int(slice_s * 1000)))
        except Exception as e:
            # A slice that ran out (DEADLINE_EXCEEDED, or an error only after waiting it out)
            # waits on; one that failed at once (the coordinator gone) is the answer.
            waited = time.monotonic() - started >= slice_s * 0.9
            if not ("DEADLINE_EXCEEDED" in str(e) or waited):
                raise
            if time.monotonic() >= deadline:
                # The whole wait, not the last slice's (jax's message names the slice).
                raise TimeoutError(
                    f"not in jax.distributed's key-value store within "
                    f"{time.monotonic() - began:.0f} s"
                ) from None
