"""The store key of a run (jax version, device kind) and the provenance stored with a profile,
taken from evidence, never guessed:

- after a run: the harness's own events (`jax_imported`: jax's `__version__`; `backend`:
  `device_kind` of device 0 and `device_count`), so a collect adds under the key it ran on;
- before a run (`--store` must hand XLA its view before the first compile, earlier than the
  harness can report the backend): pgle.launch.probe's child process in the run's
  environment; the run's own events then confirm the key (`mismatch`).

On CPU the device kind is jax's CPU device kind (`cpu`), and the key says so.
"""

from __future__ import annotations

import dataclasses

from pgle.evidence.event_kinds import JaxImported
from pgle.evidence.events import RunEvents


@dataclasses.dataclass(frozen=True)
class StoreKey:
    jax: str
    device_kind: str
    device_count: int | None = None
    jaxlib: str | None = None

    def describe(self) -> str:
        return f"jax {self.jax} on {self.device_kind}"


def from_events(events: RunEvents) -> tuple[StoreKey | None, str | None]:
    """(key, None) from a run's events, or (None, why not)."""
    from pgle.xla.versions import installed

    version = next((r.version for r in events.of(JaxImported) if r.version), None)
    backend = events.backend
    if version is None:
        return None, "the run never imported jax (no jax_imported event)"
    if backend is None or not backend.device_kind:
        return None, "the run reported no backend (it compiled nothing with JAX)"
    # jaxlib has no event of its own; the harness runs under pgle's interpreter
    # (pgle/launch/execution.py: sys.executable), so its installed jaxlib is the run's.
    return StoreKey(version, backend.device_kind, backend.device_count, installed("jaxlib")), None


def from_probe(info: dict) -> tuple[StoreKey | None, str | None]:
    """(key, None) from pgle.launch.probe.backend_info, or (None, why not)."""
    if "error" in info:
        return None, f"jax could not start a backend: {info['error']}"
    kinds = info.get("kinds") or []
    if not kinds:
        return None, "jax listed no devices"
    if len(kinds) != 1:
        return None, f"the devices are of several kinds ({', '.join(kinds)})"
    return StoreKey(info.get("jax") or "unknown", kinds[0], info.get("count")), None


def mismatch(planned: StoreKey, actual: StoreKey | None) -> str | None:
    """What differs between the key a view was made for and the run's own evidence."""
    if actual is None:
        return None
    diffs = [
        f"{what} {a!r} (the view was for {p!r})"
        for what, p, a in (
            ("jax", planned.jax, actual.jax),
            ("device kind", planned.device_kind, actual.device_kind),
        )
        if p != a
    ]
    return "the run reported " + " and ".join(diffs) if diffs else None
