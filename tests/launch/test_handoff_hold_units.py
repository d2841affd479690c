"""pgle.launch.handoff in process: a process with no jax.distributed client cannot hold (pgle
says so), a request file being written is read again until the deadline, and the held rank's
streams are flushed whatever state they are in (a full disk, a closed stream, none)."""

from __future__ import annotations

import contextlib
import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from helpers.pgle_testing import script_json
from pgle.launch import handoff


def test_a_process_without_a_distributed_client_does_not_hold(tmp_path: Path) -> None:
    written: list[str] = []
    assert handoff.hold(str(tmp_path), lambda kind, **f: written.append(kind), lambda: None,
                        1.0) is False
    assert written == [] and list(tmp_path.iterdir()) == []


def test_a_request_still_being_written_is_read_again_until_the_deadline(
        tmp_path: Path) -> None:
    path = tmp_path / "request-0.json"
    path.write_bytes(b'{"fetch": [')  # half written: not JSON yet
    began = time.monotonic()
    assert handoff._wait_for(str(path), began + 0.3) is None
    assert time.monotonic() - began >= 0.3
    path.write_bytes(b'{"final": true}')
    assert handoff._wait_for(str(path), time.monotonic() + 30) == {
        "publish": {}, "fetch": [], "timeout_s": 0.0, "final": True}


ASCII_LOCALE = textwrap.dedent("""
    import json, locale, sys, time
    from pgle.launch import handoff
    request = handoff._wait_for(sys.argv[1], time.monotonic() + 30)
    print(json.dumps([locale.getpreferredencoding(False), request]))
""")


def test_a_request_is_read_as_utf8_whatever_the_ranks_locale(tmp_path: Path) -> None:
    """pgle writes the request as UTF-8 JSON; a rank whose locale is not UTF-8 (here ASCII:
    LC_ALL=C with Python's UTF-8 mode and locale coercion off) still reads its paths as
    written, not once per poll until the deadline."""
    to = str(tmp_path / "proj ü" / "got-0")
    path = tmp_path / "request-0.json"
    path.write_bytes(json.dumps({"fetch": [{"key": "k0", "to": to}]},
                                ensure_ascii=False).encode())
    encoding, request = script_json(tmp_path, "ascii.py", ASCII_LOCALE, str(path), timeout=120,
                                    env={"LC_ALL": "C", "PYTHONUTF8": "0",
                                         "PYTHONCOERCECLOCALE": "0"})
    assert encoding.lower() in ("ascii", "ansi_x3.4-1968"), encoding
    assert request["fetch"] == [{"key": "k0", "to": to}]


def test_the_streams_are_flushed_whatever_state_they_are_in(tmp_path: Path) -> None:
    stdout, stderr = sys.stdout, sys.stderr
    full = open("/dev/full", "w")  # a full disk: its flush raises OSError (ENOSPC)
    closed = open(tmp_path / "closed", "w")
    closed.close()  # its flush raises ValueError
    try:
        for out, err in ((full, closed), (None, full), (closed, None)):
            if out is full or err is full:
                full.write("pending")
            sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
            handoff._flush_streams()  # none of them raises
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        with contextlib.suppress(OSError):  # what is still pending cannot be written
            full.close()


HELD = textwrap.dedent("""
    import json, os, signal, socket, sys, threading, time
    import jax
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1,
                               process_id=0)
    from pgle.launch import handoff, jax_internals
    mode, home = sys.argv[1], sys.argv[2]
    folder = os.path.join(home, "handoff")
    written = []

    def write(kind, **fields):
        written.append([kind, fields])

    def pgle():  # three rounds asked at once, each after the last answer
        os.makedirs(folder, exist_ok=True)
        for n in range(3):
            # round 0 publishes a file that is not there, under a long path, and one that is;
            # round 1 fetches a key that never comes (for half a second), then that one
            publish = {"k": os.path.join(home, "x" * 250), "ok": __file__} if n == 0 else {}
            fetch = [{"key": "never", "to": os.path.join(home, "never")},
                     {"key": "ok", "to": os.path.join(home, "ok")}] if n == 1 else (
                [{"key": "late", "to": os.path.join(home, "late")}] if n == 2 else [])
            request = {"publish": publish, "fetch": fetch, "timeout_s": 0.5 if n == 1 else 30,
                       "final": n == 2}
            with open(os.path.join(folder, "tmp"), "w") as f:
                json.dump(request, f)
            os.replace(os.path.join(folder, "tmp"), os.path.join(folder, f"request-{n}.json"))
            if n == 2:  # its key comes a moment after the request, well within its timeout
                time.sleep(0.2)
                jax_internals.kv_client()[0].key_value_set_bytes("late", b"came late")
            while not os.path.exists(os.path.join(folder, f"answer-{n}.json")):
                time.sleep(0.001)

    def interrupt():  # Ctrl-C once the rank waits for pgle's first request
        main = threading.main_thread().ident
        while True:
            frame = sys._current_frames().get(main)
            names = []
            while frame is not None:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            if any("_wait_for" in name for name in names):
                break
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    if mode in ("three", "interrupt"):
        threading.Thread(target=pgle if mode == "three" else interrupt, daemon=True).start()
    out = {}
    try:
        out["held"] = handoff.hold(home, write, lambda: None, 0.3 if mode == "nothing" else 60)
    except KeyboardInterrupt:
        out["interrupted"] = True
    out["written"] = written
    out["answers"] = sorted(n for n in os.listdir(folder) if n.startswith("answer-"))
    for n in (0, 1):
        if f"answer-{n}.json" in out["answers"]:
            out[f"answer{n}"] = json.load(open(os.path.join(folder, f"answer-{n}.json")))
    print(json.dumps(out), flush=True)
""")


def _held(tmp_path: Path, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = script_json(tmp_path, "held.py", HELD, mode, str(tmp_path))
    return out


def test_a_hold_nobody_asks_anything_of_ends_at_its_timeout(tmp_path: Path) -> None:
    out = _held(tmp_path, "nothing")
    assert out["held"] is True and out["answers"] == []
    assert out["written"][-1] == ["released", {"error": "pgle asked nothing within 0.3 s"}]


def test_a_hold_serves_every_round_up_to_the_final_one(tmp_path: Path) -> None:
    out = _held(tmp_path, "three")
    assert out["held"] is True
    assert out["answers"] == ["answer-0.json", "answer-1.json", "answer-2.json"]
    # a publish that fails is an error of its round's answer, its message cut at 200 chars
    missing = str(tmp_path / ("x" * 250))
    said = f"[Errno 2] No such file or directory: '{missing}'"
    assert out["answer0"] == {"fetched": {}, "errors": [f"publish k: FileNotFoundError: "
                                                        f"{said[:200]}"]}, out["answer0"]
    (error,) = out["answer1"]["errors"]  # given up after the round's own timeout
    assert error.startswith("fetch never: TimeoutError: not in jax.distributed's key-value "
                            "store within "), error
    assert out["answer1"]["fetched"] == {"ok": str(tmp_path / "ok")}  # the next one still
    assert (tmp_path / "ok").read_text() == HELD
    assert (tmp_path / "late").read_bytes() == b"came late"  # waited for, within 30 s
    assert out["written"][-1] == ["released", {"error": None}]


def test_a_held_rank_interrupted_says_so_and_stops(tmp_path: Path) -> None:
    out = _held(tmp_path, "interrupt")
    assert out.get("interrupted") is True and "held" not in out
    assert out["written"][-1] == ["released", {"error": "interrupted"}]


class _GoneCoordinator:
    """jax.distributed's client once its coordinator is gone: every get fails at once, with
    a long message of several lines (as gRPC's are)."""

    def key_value_set_bytes(self, key: str, value: bytes) -> None:
        raise AssertionError("nothing is published in this round")

    def blocking_key_value_get_bytes(self, key: str, timeout_ms: int) -> bytes:
        raise RuntimeError("UNAVAILABLE: " + "y" * 300 + "\ndetails of the second line")


def test_a_fetch_that_fails_at_once_is_its_rounds_error_cut_to_one_line(tmp_path: Path) -> None:
    """The answer names the key and the error's first line, cut at 200 characters, and writes
    nothing where the file was to go."""
    answer = handoff._serve(_GoneCoordinator(), {
        "publish": {}, "fetch": [{"key": "k0", "to": str(tmp_path / "got")}],
        "timeout_s": 30.0, "final": True})
    said = ("UNAVAILABLE: " + "y" * 300)[:200]
    assert answer == {"fetched": {}, "errors": [f"fetch k0: RuntimeError: {said}"]}
    assert list(tmp_path.iterdir()) == []


def test_a_round_without_a_timeout_waits_the_default_minute_for_its_keys(
        tmp_path: Path, monkeypatch: Any) -> None:
    """A request whose timeout_s is missing or not a number (read as 0: `_wait_for`) waits 60 s
    for a key that never comes, in slices. The clock here is the client's: each get that runs
    out advances it by the slice it was given, so no real minute passes."""
    now = [1000.0]

    class Waiting:
        def key_value_set_bytes(self, key: str, value: bytes) -> None:
            raise AssertionError("nothing is published in this round")

        def blocking_key_value_get_bytes(self, key: str, timeout_ms: int) -> bytes:
            now[0] += timeout_ms / 1000
            raise RuntimeError("DEADLINE_EXCEEDED: Deadline Exceeded")

    monkeypatch.setattr(handoff.time, "monotonic", lambda: now[0])
    answer = handoff._serve(Waiting(), {"publish": {}, "fetch": [
        {"key": "k0", "to": str(tmp_path / "got")}], "timeout_s": 0.0, "final": True})
    assert answer == {"fetched": {}, "errors": [
        "fetch k0: TimeoutError: not in jax.distributed's key-value store within 60 s"]}
    assert now[0] == 1060.0
