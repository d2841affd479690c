"""Ask the installed jaxlib whether it accepts an XLA_FLAGS string.

XLA parses XLA_FLAGS once, when the first backend starts, and aborts the process
on an unknown flag (`Unknown flag(s) in XLA_FLAGS: ...`) or a value it cannot
read (`Couldn't interpret value ...`, then `Flag parsing failed`). So the probe
is a child process that starts the CPU backend with the flags and reports how
it ended; GPU flags are parsed (and accepted) by CPU jaxlib too.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import re
import subprocess
import sys
import tempfile

from pgle.errors import FlagError
from pgle.xla import versions
from pgle.xla.flags import XlaFlags

_OK_MARK = "PGLE_PROBE_ACCEPTED"
# CPU only: initializing a GPU is slow and is not needed to parse flags.
_CHILD = (
    "import jax, jaxlib.version\n"
    "jax.devices()\n"
    f"print('{_OK_MARK}', jaxlib.version.__version__, flush=True)\n"
)
# jax >= 0.5.1: "Unknown flag in XLA_FLAGS: --x=1"; jax <= 0.5.0: "Unknown flags in XLA_FLAGS:
# --x=1  <the rest of XLA_FLAGS>" (the unknown ones, two spaces, then the others: seen on
# 0.4.35, 0.4.38, 0.5.0 in the lane), read as pgle.evidence.logscan.UNKNOWN_FLAGS reads it.
_UNKNOWN = re.compile(r"Unknown flags? in XLA_FLAGS: (.*?)(?:  .*)?$", re.M)
_BAD_VALUE = re.compile(r"Couldn't interpret value (.*) for flag (\S+?)\.?$", re.M)
_ILLEGAL = re.compile(r"Illegal value for --(\S+) '(.*)'", re.M)
_NO_FILE = re.compile(r"Could not open file \"(.*)\" to read flags")
_PARSE_FAILED = "Flag parsing failed"
_NAME = re.compile(r"(?:^|\s)-+([-_A-Za-z0-9]+)")

DEFAULT_TIMEOUT_S = 60.0


@dataclasses.dataclass
class FlagVerdict:
    flag: str  # as written
    name: str
    status: str  # accepted | unknown | bad_value | not_checked
    message: str = ""


@dataclasses.dataclass
class ProbeResult:
    accepted: bool  # XLA started with the whole string
    verdicts: list[FlagVerdict]
    error: str = ""  # the probe itself failed (jax missing, timeout, file unreadable)
    jaxlib_version: str | None = None  # of the jaxlib that answered

    def rejected(self) -> list[FlagVerdict]:
        return [v for v in self.verdicts if v.status in ("unknown", "bad_value")]

    def to_dict(self) -> dict:
        return {
            "accepted": self.accepted,
            "error": self.error,
            "jaxlib_version": self.jaxlib_version,
            "flags": [dataclasses.asdict(v) for v in self.verdicts],
        }


@dataclasses.dataclass
class _Run:
    ok: bool
    jaxlib_version: str | None
    unknown: set[str]  # flag names
    bad: dict[str, str]  # flag name -> message
    parse_failed: bool
    error: str


def probe(
    text: str | None,
    *,
    environ: dict[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
    python: str | None = None,
) -> ProbeResult:
    """Start jax with XLA_FLAGS=`text` and say which flags XLA rejects.

    XLA reports unknown flags only once every value parsed, so flags whose values
    it names as unreadable are dropped and the rest tried again; a rejected value
    it does not name (some enums) leaves each remaining flag to be tried alone.
    """
    if not text:
        return ProbeResult(True, [], "", _installed(python))
    run = _run(text, environ, timeout, python)
    try:
        flags = XlaFlags.parse(text).flags
    except FlagError:
        flags = []  # a file XLA could not open either: run.error says so
    if run.error and not (run.unknown or run.bad or run.parse_failed):
        return ProbeResult(
            False,
            [FlagVerdict(f.raw, f.name, "not_checked") for f in flags],
            run.error,
            _installed(python),
        )
    verdicts = {
        i: _verdict(f.raw, f.name, run)
        for i, f in enumerate(flags)
        if f.name in run.bad or not run.parse_failed
    }
    rest = [i for i in range(len(flags)) if i not in verdicts]
    if rest and run.bad:  # without the named bad values, XLA may get to the unknown flags
        again = _run(" ".join(flags[i].raw for i in rest), environ, timeout, python)
        if not again.parse_failed or again.bad:
            verdicts.update(
                {
                    i: _verdict(flags[i].raw, flags[i].name, again)
                    for i in rest
                    if flags[i].name in again.bad or not again.parse_failed
                }
            )
        rest = [i for i in rest if i not in verdicts]
    if rest:
        workers = max(2, os.cpu_count() or 2)
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            alone = pool.map(lambda i: _run(flags[i].raw, environ, timeout, python), rest)
            verdicts.update(
                {
                    i: _verdict(flags[i].raw, flags[i].name, r)
                    for i, r in zip(rest, alone, strict=False)
                }
            )
    ordered = [verdicts[i] for i in range(len(flags))]
    return ProbeResult(run.ok, ordered, "", run.jaxlib_version or _installed(python))


def _installed(python: str | None) -> str | None:
    """jaxlib's version without a child, when the child is this interpreter."""
    return versions.installed("jaxlib") if python is None else None


def _verdict(raw: str, name: str, run: _Run) -> FlagVerdict:
    if name in run.unknown:
        return FlagVerdict(raw, name, "unknown", "XLA does not know this flag")
    if name in run.bad:
        return FlagVerdict(raw, name, "bad_value", run.bad[name])
    if run.ok or (run.unknown and not run.parse_failed):
        return FlagVerdict(raw, name, "accepted")
    if run.parse_failed:
        # An enum value XLA rejects without naming it: this run had only this flag.
        return FlagVerdict(raw, name, "bad_value", "XLA could not parse its value")
    return FlagVerdict(raw, name, "not_checked", run.error)


def _run(text: str, environ: dict[str, str] | None, timeout: float, python: str | None) -> _Run:
    env = dict(os.environ if environ is None else environ)
    env.update(XLA_FLAGS=text, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="1")
    python = python or sys.executable
    try:
        proc = run_child(_CHILD, env, timeout, python)
    except OSError as e:
        return _Run(False, None, set(), {}, False, f"cannot start {python}: {e.strerror}")
    if proc is None:
        return _Run(False, None, set(), {}, False, f"jax did not start within {timeout:g} s")
    return parse_output(proc.returncode, proc.stdout, proc.stderr)


def run_child(
    code: str, env: dict[str, str], timeout: float, python: str | None = None
) -> subprocess.CompletedProcess[str] | None:
    """`python -c code` (this interpreter by default), None when it outlives `timeout`; OSError
    when `python` does not start. A temp cwd keeps a local jax.py (or the user's package) from
    shadowing jax."""
    with tempfile.TemporaryDirectory(prefix="pgle-probe-") as cwd:
        try:
            return subprocess.run(
                [python or sys.executable, "-c", code],
                env=env,
                cwd=cwd,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return None


def parse_output(returncode: int, stdout: str, stderr: str) -> _Run:
    """Classify one probe child's end from its output."""
    for line in stdout.splitlines():
        if line.startswith(_OK_MARK) and returncode == 0:
            return _Run(
                True, line.split()[1] if len(line.split()) > 1 else None, set(), {}, False, ""
            )
    unknown: set[str] = set()
    m = _UNKNOWN.search(stderr)
    if m:
        unknown = set(_NAME.findall(m.group(1)))
    bad = {
        name: f"XLA could not read the value {value!r}"
        for value, name in _BAD_VALUE.findall(stderr)
    }
    bad.update(
        {name: f"XLA rejected the value {value!r}" for name, value in _ILLEGAL.findall(stderr)}
    )
    parse_failed = _PARSE_FAILED in stderr
    error = ""
    if not (unknown or bad or parse_failed):
        no_file = _NO_FILE.search(stderr)
        if no_file:
            error = (
                f"XLA_FLAGS does not start with '--', so XLA read it as a file name and could "
                f"not open {no_file.group(1)!r}"
            )
        else:
            tail = [ln for ln in stderr.strip().splitlines() if ln.strip()]
            error = f"jax exited with code {returncode}: {tail[-1] if tail else 'no output'}"
    return _Run(False, None, unknown, bad, parse_failed, error)


def refuse_rejected(
    flags: XlaFlags,
    environ: dict[str, str] | None = None,
    jax_version: tuple[int, ...] | None = None,
) -> list[str]:
    """Before a launch: ask the installed jaxlib about the flags pgle's table does not know.

    XLA aborts the workload at backend start on a flag it does not know, and
    the verdict could then only guess; so a rejected flag is refused here
    (FlagError, exit 2). Costs one jax start, and only when such flags exist.
    Returns warnings (the probe itself could not run).
    """
    from pgle.xla import flag_table

    rows = flag_table.explain_all(flags.flags, jax_version)
    unknown = [f for f, r in zip(flags.flags, rows, strict=False) if r["status"] == "unknown"]
    if not unknown:
        return []
    result = probe(" ".join(f.raw for f in unknown), environ=environ)
    if result.error:
        return [f"could not ask jaxlib about {' '.join(f.raw for f in unknown)}: {result.error}"]
    rejected = result.rejected()
    if rejected:
        v = rejected[0]
        raise FlagError(
            f"XLA_FLAGS has {v.flag}: jaxlib {result.jaxlib_version} rejects it "
            f"({v.message}), so XLA would abort the workload at startup.",
            hint="Fix or remove it; `pgle flags explain --probe` checks every flag.",
        )
    return []
