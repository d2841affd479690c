"""Predicted beside measured: what `pgle tune --compare --predict --store` keeps next to the
step module's profile entry, so `pgle estimate`'s predictions can be calibrated per platform
once GPU runs exist.

STORE/profiles/<fingerprint>/<entry>.calibration.jsonl holds one record per line and arm:
the arm, the ratio `pgle estimate` predicted (XLA:GPU's scheduler, deviceless) and the ratio
tune measured on the GPUs (either may be null: an arm estimate does not compile, too few steps),
the target the prediction compiled for, the device kind and count and the jax version of the
measurement, the pgle version, when. The file lives and dies with its entry (pgle.store.store
removes it with the entry, sweeps it when the entry is gone). Another user can write it: every
record is checked (`from_dict`) and a line that fails is skipped, never trusted.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
from typing import Any

SUFFIX = ".calibration.jsonl"
MAX_RECORDS = 256  # per entry: the newest kept (tune writes one per arm)
MAX_BYTES = 1 << 20
_ARM_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+")


@dataclasses.dataclass(frozen=True)
class Calibration:
    arm: str  # default, pgle, o1, sol, o1+pgle, ...
    predicted_ratio: float | None  # pgle estimate's arm / default
    measured_ratio: float | None  # tune's measured median ratio, arm / default
    target: str  # the XLA:GPU target the prediction compiled for (h100, ...)
    device_kind: str  # what the measurement ran on (jax's device_kind)
    device_count: int
    jax: str
    pgle: str
    created: str  # ISO time, UTC

    @staticmethod
    def now() -> str:
        return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Calibration:
        """A record read from a store (untrusted); ValueError or TypeError saying why not."""
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in data]
        if missing:
            raise ValueError(f"no {missing[0]!r} field")
        for name in ("arm", "target", "device_kind", "jax", "pgle", "created"):
            value = data[name]
            if not isinstance(value, str) or len(value) > 200:
                raise TypeError(f"{name} is not a short string")
        if not data["arm"] or not set(data["arm"]) <= _ARM_CHARS:
            raise ValueError(f"arm {data['arm']!r} is not an arm name")
        for name in ("predicted_ratio", "measured_ratio"):
            value = data[name]
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} is not a number")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} {value!r} is not a positive ratio")
        count = data["device_count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError("device_count is not a count")
        dt.datetime.fromisoformat(data["created"])  # ValueError when not a time
        return cls(**{n: data[n] for n in names})


def encode(records: list[Calibration]) -> bytes:
    return "".join(json.dumps(r.to_dict()) + "\n" for r in records[-MAX_RECORDS:]).encode()


def decode(raw: bytes) -> tuple[list[Calibration], int]:
    """The records of a file, and how many lines were skipped (not a record)."""
    out: list[Calibration] = []
    bad = 0
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            out.append(Calibration.from_dict(json.loads(line)))
        except (ValueError, TypeError, RecursionError):
            bad += 1
    return out, bad
