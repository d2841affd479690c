"""The one benchmark harness every script in benchmarks/ uses (issue 16).

Method, the same for every figure:
- both sides are whole processes (`Side`: an argv, or a shell pipeline such as
  `grep -c -E ... FILE | cat`), imports and interpreter start-up included on both;
- one unmeasured warm-up run of each side (page cache, .pyc files);
- at least 5 pairs, the order alternating pair by pair (anchor first in even pairs,
  subject first in odd ones) so neither side always pays the colder caches;
- the figure is the min / median / max of the PER-PAIR ratios subject / anchor (never a
  ratio of medians or minima taken at different times);
- wall time from `time.perf_counter` around the process, peak memory from `wait4`'s
  `ru_maxrss` (for a pipeline: the largest of its processes); where the question is the
  speed of a program that runs under pgle (not pgle's own), each side may also report the
  program's own run time as the program measured it (`Side.own_time`), and the per-pair
  ratios of those come out as `own_ratio`, from the same runs;
- the machine is recorded with the result: cores, load average at start and end,
  python, jax/jaxlib/protobuf versions and protobuf's backend.

Each benchmark writes one JSON file under benchmarks/results/ (`write_result`);
`benchmarks/run_all.py` runs them and regenerates the figures table of
docs/performance.md from those files alone.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
MIN_PAIRS = 5


@dataclasses.dataclass
class Side:
    """One side of a comparison: a whole process (argv) or a shell pipeline (shell=True).

    `before` runs (untimed) before every run of this side, e.g. to remove an output file."""

    name: str
    argv: Sequence[str] | str
    env: dict[str, str] | None = None
    cwd: str | os.PathLike | None = None
    shell: bool = False
    stdout_to_null: bool = True
    before: Callable[[], None] | None = None
    check: Callable[[int], None] | None = None  # gets the exit status; raise on a bad run
    # After each run: the program's own run time as it measured and wrote it (seconds).
    own_time: Callable[[], float] | None = None


@dataclasses.dataclass
class Run:
    seconds: float
    max_rss_mb: float
    status: int
    own_seconds: float | None = None
    cpu_seconds: float = 0.0  # user + system of the process and the children it waited for


def run_once(side: Side) -> Run:
    """Run `side` once as a whole process; wall time and peak RSS of the process(es)."""
    if side.before:
        side.before()
    argv = ["/bin/sh", "-c", side.argv] if side.shell else list(side.argv)
    stdout = subprocess.DEVNULL if side.stdout_to_null else None
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=side.env, cwd=side.cwd, stdout=stdout,
                         stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    p.returncode = code = os.waitstatus_to_exitcode(status)
    # ru_maxrss of the waited process; for `sh -c "a | b"` children of sh are reaped by sh,
    # so the shell's rusage already includes them (RUSAGE of waited-for descendants).
    rss = usage.ru_maxrss / 1024
    if side.check:
        side.check(code)
    elif code != 0:
        raise SystemExit(f"benchmark side {side.name!r} failed with exit status {code}: {side.argv}")
    return Run(seconds, rss, code, side.own_time() if side.own_time else None,
               usage.ru_utime + usage.ru_stime)


def spread(values: Sequence[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def machine() -> dict:
    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    try:
        from google.protobuf.internal import api_implementation

        backend = api_implementation.Type()
    except ImportError:
        backend = None
    return {
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "jax": version("jax"), "jaxlib": version("jaxlib"),
        "protobuf": version("protobuf"), "protobuf_backend": backend,
    }


# Linux keeps a process's peak RSS across fork and exec (exec folds the old address space's
# high-water mark into the signal struct's maxrss), so every side's `ru_maxrss` is at least
# this process's own peak at the time it spawned the side. Above this, memory figures would
# be the harness's, not the sides' (a 200 MB trace generated in-process made pgle's 434 MB
# conversion read as 1.9 GB): make large inputs in a subprocess.
OWN_PEAK_LIMIT_MB = 256


def _check_own_peak() -> None:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if own > OWN_PEAK_LIMIT_MB:
        raise SystemExit(f"the benchmark process itself peaked at {own:.0f} MB: every side it "
                         "spawns would report at least that as its peak RSS; generate large "
                         "inputs in a subprocess")


def compare(anchor: Side, subject: Side, *, pairs: int = 7, warmup: int = 1) -> dict:
    """Alternating pairs of whole-process runs; per-pair ratios subject / anchor."""
    if pairs < MIN_PAIRS:
        raise SystemExit(f"at least {MIN_PAIRS} pairs (got {pairs})")
    _check_own_peak()
    for _ in range(warmup):
        run_once(anchor)
        run_once(subject)
    rows = []
    for i in range(pairs):
        order = (anchor, subject) if i % 2 == 0 else (subject, anchor)
        got = {s.name: run_once(s) for s in order}
        rows.append((got[anchor.name], got[subject.name]))
    return summarize(anchor.name, subject.name, rows)


def summarize(anchor: str, subject: str, rows: Sequence[tuple[Run, Run]]) -> dict:
    a_t = [a.seconds for a, _ in rows]
    s_t = [s.seconds for _, s in rows]
    own = {}
    if all(a.own_seconds and s.own_seconds for a, s in rows):
        a_o = [a.own_seconds for a, _ in rows]
        s_o = [s.own_seconds for _, s in rows]
        own = {"own_ratio": spread([s / a for a, s in zip(a_o, s_o)]),
               "anchor_own_s": spread(a_o), "subject_own_s": spread(s_o)}
    return {
        "anchor": anchor, "subject": subject, "pairs": len(rows),
        "ratio": spread([s / a for a, s in zip(a_t, s_t)]),
        "anchor_s": spread(a_t), "subject_s": spread(s_t),
        "anchor_rss_mb": spread([a.max_rss_mb for a, _ in rows]),
        "subject_rss_mb": spread([s.max_rss_mb for _, s in rows]),
        "memory_ratio": spread([s.max_rss_mb / a.max_rss_mb if a.max_rss_mb else 0.0 for a, s in rows]),
        # (anchor, subject) seconds of every pair, in order: for figures derived per pair.
        "pairs_s": [[round(a.seconds, 4), round(s.seconds, 4)] for a, s in rows],
        "anchor_cpu_s": spread([a.cpu_seconds for a, _ in rows]),
        "subject_cpu_s": spread([s.cpu_seconds for _, s in rows]),
        **own,
    }


class Recorder:
    """Collects a benchmark's figures and writes benchmarks/results/<name>.json."""

    def __init__(self, name: str, argv: Sequence[str] | None = None):
        self.name = name
        self.command = "python benchmarks/%s.py %s" % (name, " ".join(argv or sys.argv[1:]))
        self.machine = machine()
        self.load_start = os.getloadavg()
        self.started = time.time()
        self.figures: list[dict] = []

    def figure(self, key: str, *, what: str, anchor: str, goal: str, value: dict, met: bool | None,
               unit: str = "x", why: str = "", details: dict | None = None) -> dict:
        """One row of the performance table. `value` is a min/median/max dict in `unit`
        ('x' = ratio subject/anchor over >= 5 pairs, 'x-size' = a ratio to a size, '%' = percent
        over the anchor, 'MB/s', 's', 'MB', '' = a plain number such as an exponent)."""
        fig = {"key": key, "what": what, "anchor": anchor, "goal": goal, "unit": unit,
               "value": value, "met": met, "why": why, "details": details or {}}
        self.figures.append(fig)
        shown = "/".join(fmt(value[k], unit) for k in ("min", "median", "max"))
        state = {True: "met", False: "NOT met", None: "-"}[met]
        print(f"{key}: {what}: {shown} (goal {goal}: {state})", flush=True)
        return fig

    def write(self) -> Path:
        RESULTS.mkdir(parents=True, exist_ok=True)
        out = RESULTS / f"{self.name}.json"
        doc = {"benchmark": self.name, "command": self.command.strip(),
               "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(self.started)),
               "machine": dict(self.machine, load_start=[round(x, 2) for x in self.load_start],
                               load_end=[round(x, 2) for x in os.getloadavg()]),
               "figures": self.figures}
        tmp = out.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
        os.replace(tmp, out)
        print(f"wrote {out.relative_to(ROOT)}")
        return out


def fmt(v: float, unit: str) -> str:
    if unit == "x":
        return f"{v:.2f}×"
    if unit == "%":
        return f"{v:+.1f}%"
    if unit == "MB/s":
        return f"{v:.0f} MB/s"
    if unit == "s":
        return f"{v:.2f} s"
    if unit == "MB":
        return f"{v:.0f} MB"
    if unit == "":
        return f"{v:.2f}"
    if unit == "x-size":  # a ratio to a size (memory over the input), not of two timed sides
        return f"{v:.2f}×"
    return f"{v:.3g} {unit}"


def percent(summary: dict) -> dict:
    """A ratio spread as percent over the anchor."""
    return {k: (v - 1) * 100 for k, v in summary["ratio"].items()}


def python_env(**extra: str) -> dict[str, str]:
    """The environment for Python sides (both get the same): this checkout first on the path,
    no JAX/XLA variables from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_", "TF_CPP_"))}
    # A user's install has .pyc files (pip compiles them) and block-buffered pipes: a shell
    # that sets PYTHONDONTWRITEBYTECODE would make every run compile pgle from source, and
    # PYTHONUNBUFFERED would change the programs' own speed, on both sides.
    for name in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def pgle_argv(*args: str) -> list[str]:
    """`pgle ARGS` as a user types it: the console script next to this interpreter when there
    is one (it is what `pgle` on PATH runs), else `python -m pgle`."""
    script = Path(sys.executable).with_name("pgle")
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-m", "pgle", *args]


@dataclasses.dataclass(frozen=True)
class UserInstall:
    """pgle installed the way users install it (`pip install pgle`): its own venv, no system
    site-packages and no editable-install import hook, this checkout built into a wheel and
    installed with pip (which compiles the .pyc files); pgle's dependencies pinned to this
    environment's versions, so both sides of a comparison run the same jax and numpy."""

    python: str
    pgle: str
    cwd: str  # outside the checkout: `python -c` puts the cwd first on sys.path

    def pgle_argv(self, *args: str) -> list[str]:
        return [self.pgle, *args]

    def env(self, **extra: str) -> dict[str, str]:
        """No PYTHONPATH (the installed pgle, not this checkout), no JAX/XLA variables."""
        env = python_env(**extra)
        env.pop("PYTHONPATH", None)
        env.update(extra)
        return env


USER_VENV = ROOT / "benchmarks" / ".venv-user"
# pgle's dependencies and the anchors' (jaxlib's aggregate, its trace converter)
USER_DEPENDENCIES = ("jax", "jaxlib", "numpy", "protobuf", "click", "filelock", "etils",
                     "fsspec", "importlib_resources", "typing_extensions", "zipp")
_user_install: UserInstall | None = None


def user_install() -> UserInstall:
    """The venv of `UserInstall` (created once; pgle reinstalled from this checkout on each
    benchmark run, ~10 s). Needs pip to reach the package index the first time."""
    global _user_install
    if _user_install is not None:
        return _user_install
    python = USER_VENV / "bin" / "python"
    pins = []
    for dist in USER_DEPENDENCIES:
        try:
            pins.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    stamp = USER_VENV / "pins.txt"
    if not python.exists() or not stamp.exists() or stamp.read_text() != "\n".join(pins):
        base = Path(sys.base_prefix) / "bin" / "python3"
        subprocess.run([str(base), "-m", "venv", "--clear", str(USER_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *pins, "etils[epath]"],
                       check=True)
        stamp.write_text("\n".join(pins))
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                    str(ROOT)], check=True, cwd=tempfile.gettempdir())
    _user_install = UserInstall(str(python), str(USER_VENV / "bin" / "pgle"), tempfile.gettempdir())
    return _user_install


def pairs_arg(parser, default: int = 7) -> None:
    parser.add_argument("--pairs", type=int, default=default, help="alternating pairs (>= 5)")
