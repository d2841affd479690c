"""The harness's capture of a logger (`--capture-logger NAME=LEVEL`; JAX's compile log), in
process on real `logging` loggers: every record down to the captured level is written to the
events, and the user's handlers see exactly what they saw before (the records at or above the
level the user's configuration makes visible)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import step_records
from pgle.evidence import schema
from pgle.launch.harness import Events, _capture_logger


class Kept(logging.Handler):
    """The user's own handler: the messages it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def parent() -> Iterator[logging.Logger]:
    """A logger tree of the test's own (left as the test found the logging module)."""
    logger = logging.getLogger(f"pgletest{uuid.uuid4().hex}")
    logger.propagate = False
    yield logger
    for child in [logger, *logging.Logger.manager.loggerDict.values()]:
        if isinstance(child, logging.Logger) and child.name.startswith(logger.name):
            child.filters.clear()
            child.handlers.clear()


def _logged(path: Path) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in ("kind", "t", "edges")}
            for e in step_records.old_lines(path) if e["kind"] == schema.LOG]


@pytest.mark.parametrize("level", ["DEBUG", logging.DEBUG])
def test_records_below_the_users_level_are_captured_and_kept_from_its_handlers(
        parent: logging.Logger, tmp_path: Path, level: str | int) -> None:
    parent.setLevel(logging.INFO)
    logger = logging.getLogger(parent.name + ".compiler")
    kept = Kept()
    logger.addHandler(kept)
    events = Events(str(tmp_path / "events.jsonl"))
    try:
        _capture_logger(logger.name, level, events)  # type: ignore[arg-type]
        logger.debug("cache miss for %s", "jit_step")
        logger.info("compiled %s", "jit_step")
        logger.debug("a %d placeholder", "not a number")  # the record's own error
        events.flush()
    finally:
        events.close()
    native = str(threading.get_native_id())
    assert _logged(tmp_path / "events.jsonl") == [
        {"logger": logger.name, "level": "DEBUG", "message": "cache miss for jit_step",
         "thread": native},
        {"logger": logger.name, "level": "INFO", "message": "compiled jit_step",
         "thread": native},
        {"logger": logger.name, "level": "DEBUG", "message": "a %d placeholder",
         "thread": native}]
    assert kept.messages == ["compiled jit_step"]  # INFO, as the user's tree shows it
    assert logger.level == logging.DEBUG  # lowered, so that its records are made


def test_a_logger_already_at_the_level_is_left_as_the_user_set_it(
        parent: logging.Logger, tmp_path: Path) -> None:
    """A logger whose tree already emits the captured level keeps its own level unset (it
    follows its parent's, as the user configured); its own level, when set, is what shows."""
    parent.setLevel(logging.DEBUG)
    inherits = logging.getLogger(parent.name + ".a")
    own = logging.getLogger(parent.name + ".b")
    own.setLevel(logging.WARNING)
    kept = Kept()
    own.addHandler(kept)
    events = Events(str(tmp_path / "events.jsonl"))
    try:
        _capture_logger(inherits.name, "DEBUG", events)
        _capture_logger(own.name, "INFO", events)
        own.info("below its own level")
        own.warning("at its own level")
        events.flush()
    finally:
        events.close()
    assert inherits.level == logging.NOTSET and own.level == logging.INFO
    assert kept.messages == ["at its own level"]
    assert [e["message"] for e in _logged(tmp_path / "events.jsonl")] == [
        "below its own level", "at its own level"]


def test_the_root_loggers_visible_level_is_warnings_without_a_parent(tmp_path: Path) -> None:
    root = logging.getLogger()
    level, filters = root.level, list(root.filters)
    root.setLevel(logging.NOTSET)
    kept = Kept()
    root.addHandler(kept)
    events = Events(str(tmp_path / "events.jsonl"))
    try:
        _capture_logger("", "INFO", events)
        root.info("captured only")
        root.warning("shown")
        events.flush()
    finally:
        events.close()
        root.removeHandler(kept)
        root.filters[:] = filters
        root.setLevel(level)
    assert kept.messages == ["shown"]
    assert [e["message"] for e in _logged(tmp_path / "events.jsonl")] == ["captured only",
                                                                         "shown"]
