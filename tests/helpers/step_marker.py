"""A stand-in for the class the harness's step class extends (jax's StepTraceAnnotation in a
run), for in-process tests of pgle.launch.harness without jax's profiler."""

from __future__ import annotations

from typing import Any


class Marker:
    """Its hooks run in this one's __init__ and __exit__, as in StepTraceAnnotation's."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.name = name

    def __exit__(self, *exc: object) -> None:
        return None
