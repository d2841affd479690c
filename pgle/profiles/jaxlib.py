"""The JAX profiler's output folder and jaxlib's conversion to a PGLE profile.

`jax.profiler.stop_trace()` writes `<dir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<host>.xplane.pb`;
jaxlib's reader is not recursive, so the run folder itself must be handed to it.
"""

from __future__ import annotations

from pathlib import Path

from pgle.errors import PgleError


def run_folders(trace_dir: Path | str) -> list[Path]:
    root = Path(trace_dir) / "plugins" / "profile"
    if not root.is_dir():
        return []
    runs = [p for p in root.iterdir() if p.is_dir() and any(p.glob("*.xplane.pb"))]
    # Names are timestamps; the mtime breaks ties between runs in the same second.
    return sorted(runs, key=lambda p: (p.name, p.stat().st_mtime))


def newest_run_folder(trace_dir: Path | str) -> Path | None:
    runs = run_folders(trace_dir)
    return runs[-1] if runs else None


def convert_with_jaxlib(run_folder: Path | str) -> bytes:
    """jaxlib's converter: every GPU event's mean duration per instruction name
    (docs/xla-facts.md section 2)."""
    from jax.experimental import profiler as jax_profiler

    try:
        return jax_profiler.get_profiled_instructions_proto(str(run_folder))
    except Exception as e:  # jaxlib raises XlaRuntimeError/RuntimeError on unreadable traces
        raise PgleError(f"jaxlib could not convert the trace in {run_folder}: {e}") from None


GPU_PLANE = b"/device:GPU:"  # XPlane names of GPU devices (jax 0.4.34-0.10.2 traces)


def has_gpu_plane(run_folder: Path, chunk: int = 1 << 24) -> bool:
    """Whether any `*.xplane.pb` of the run folder names a GPU plane. A streaming byte search
    (the plane name is a plain string in the proto): seconds for a trace whose conversion takes
    minutes and gigabytes."""
    for path in sorted(Path(run_folder).glob("*.xplane.pb")):
        tail = b""
        try:
            with open(path, "rb") as f:
                while True:
                    block = f.read(chunk)
                    if not block:
                        break
                    if GPU_PLANE in tail + block:
                        return True
                    tail = block[-len(GPU_PLANE) :]
        except OSError:
            return True  # unreadable here: let the conversion report it
    return False
