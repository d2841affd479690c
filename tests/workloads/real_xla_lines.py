"""Real XLA:GPU log lines for the replay workloads (replay_xla_log.py, dist_replay.py).

Every line comes from a log the real XLA:GPU compiler printed in the XLA:GPU lane
(tests/data/xla_gpu/<jax>/<scenario>.log: the deviceless compiles of tests/xla_gpu/lane.py).
Its wording, source file and line number, and prefix (absl, or tsl before jax 0.7.2) are kept
as captured; only its variable fields are replaced: the thread id, the profile path, module
name, module id, fingerprint, instruction counts and names. As XLA does, a line is printed only
when the environment lets XLA print it: INFO below TF_CPP_MIN_LOG_LEVEL is hidden, the VLOG(1)
lines (`Fingerprint before LHS`, `PGLE fallback`) need TF_CPP_VMODULE=gpu_hlo_schedule=1, and
the tsl prefix carries the thread id only with TF_CPP_LOG_THREAD_ID set (an integer != 0).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "xla_gpu"

_ABSL = re.compile(r"^(?P<head>(?P<sev>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+)\s+(?P<tid>\d+) "
                   r"(?P<src>\S+:\d+)\] (?P<msg>.*)$")
_TSL = re.compile(r"^(?P<head>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<sev>[IWEF]))"
                  r"(?:\s+(?P<tid>\d+))? (?P<src>\S+:\d+)\] (?P<msg>.*)$")

# Messages, with their variable fields as named groups (what `fill` replaces).
FINGERPRINT = (r"^Fingerprint before LHS for module (?P<module>\S+?)\((?P<id>\d+)\) = "
               r"(?P<fp>[0-9a-f]+)$")
USING = r"^Using PGLE profile from (?P<path>.+?)\s*$"
FALLBACK = r"^PGLE fallback: using SolLatencyEstimator"
FOUND_PROFILE = r"^Found profile(?: for module (?P<module>\S+?))?, using profile guided latency"
PROFILE = r"^Profile:"
FOUND_N = r"^Found (?P<n>\d+) instructions from the profile\.$"
MISSING_N = r"^Missing (?P<n>\d+) instructions from the profile\.$"
MISSING_NAME = r"^  (?P<name>\S+)$"
NOT_EXIST = r"^PGLE profile file does not exist: (?P<path>.+?)\s*$"
DISCARD = r"RuntimeError: INVALID_ARGUMENT: Found (?P<n>\d+) missing instructions\. Discarding"
# VLOG(1) in gpu_hlo_schedule.cc: gone without TF_CPP_VMODULE (the lane's no-vmodule logs).
_VLOG1 = (FINGERPRINT, FALLBACK)
_LEVEL = {"I": 0, "W": 1, "E": 2, "F": 3}


@dataclasses.dataclass(frozen=True)
class Line:
    """One captured XLA line: prefix parts and message (a line without a prefix: `head` '')."""

    style: str  # absl | tsl | raw
    head: str
    sev: str
    src: str
    msg: str
    origin: str  # <jax>/<scenario>.log, for the reader of a replayed log

    def fill(self, pattern: str, **values: object) -> Line:
        """This line with the named groups of `pattern` in its message set to `values`."""
        m = re.search(pattern, self.msg)
        if m is None:
            raise ValueError(f"{self.origin}: {self.msg!r} does not match {pattern!r}")
        out, last = [], 0
        for name, value in values.items():
            if m.start(name) < 0:  # a group this version's wording lacks (no module name)
                continue
            out += [self.msg[last:m.start(name)], str(value)]
            last = m.end(name)
        return dataclasses.replace(self, msg="".join(out) + self.msg[last:])

    def render(self, tid: int, environ: dict[str, str] | None = None) -> str | None:
        """The line as XLA prints it from thread `tid`; None where XLA would not print it."""
        env = os.environ if environ is None else environ
        if self.style == "raw":
            return self.msg
        if _LEVEL[self.sev] < _int(env.get("TF_CPP_MIN_LOG_LEVEL"), 0):
            return None
        if any(re.search(p, self.msg) for p in _VLOG1) and not _vlog_on(env):
            return None
        if self.style == "tsl" and not _int(env.get("TF_CPP_LOG_THREAD_ID"), 0):
            return f"{self.head} {self.src}] {self.msg}"
        return f"{self.head} {tid:>7} {self.src}] {self.msg}"


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _vlog_on(env) -> bool:
    modules = dict(item.split("=", 1) for item in env.get("TF_CPP_VMODULE", "").split(",")
                   if "=" in item)
    return _int(modules.get("gpu_hlo_schedule"), 0) >= 1 or \
        _int(env.get("TF_CPP_MAX_VLOG_LEVEL"), 0) >= 1


class Captured:
    """The lane's captured logs of one jax version."""

    def __init__(self, version: str):
        self.version = version
        self.dir = DATA / version
        if not self.dir.is_dir():
            raise FileNotFoundError(f"no captured XLA:GPU logs for jax {version} in {DATA}")

    def lines(self, scenario: str) -> list[Line]:
        out = []
        for raw in (self.dir / f"{scenario}.log").read_text().splitlines():
            m = _ABSL.match(raw) or _TSL.match(raw)
            origin = f"{self.version}/{scenario}.log"
            if m is None:
                out.append(Line("raw", "", "", "", raw, origin))
            else:
                out.append(Line("absl" if m.re is _ABSL else "tsl", m.group("head"),
                                m.group("sev"), m.group("src"), m.group("msg"), origin))
        return out

    def first(self, scenario: str, pattern: str) -> Line:
        for line in self.lines(scenario):
            if re.search(pattern, line.msg):
                return line
        raise LookupError(f"{self.version}/{scenario}.log has no line matching {pattern!r}")

    def module_block(self, scenario: str, index: int = 0) -> list[Line]:
        """The scheduler's lines for one of the program's modules (the `index`-th `jit_*`),
        from its `Fingerprint before LHS` line to the next module's (single-threaded
        scenarios), without the deviceless compiler's own lines and without the modules XLA
        schedules on its own (jax >= 0.11's autotuner candidates, 0.7.2/0.8.3's clones)."""
        blocks: list[list[Line]] = []
        current: list[Line] | None = None
        for line in self.lines(scenario):
            m = re.search(FINGERPRINT, line.msg)
            if m:
                own = m.group("module").startswith("jit_") and \
                    not m.group("module").endswith("-clone")
                current = [] if own else None
                if current is not None:
                    blocks.append(current)
            if current is not None and line.style != "raw" and "deviceless" not in line.msg:
                current.append(line)
        return blocks[index]


def module_read(cap: Captured, *, path: str, module: str, module_id: int, fp: str,
                found: int = 0, missing: list[str] = ()) -> list[Line]:
    """A module compiled with a single-file profile: the captured good-profile block with
    `path`/`module`/`fp`, then (when instructions are missing) the accuracy checker's block
    as partial-warn.log has it."""
    out = []
    for line in cap.module_block("good-pbtxt"):
        if re.search(FINGERPRINT, line.msg):
            line = line.fill(FINGERPRINT, module=module, id=module_id, fp=fp)
        elif re.search(USING, line.msg):
            line = line.fill(USING, path=path)
        elif re.search(FOUND_PROFILE, line.msg):
            line = line.fill(FOUND_PROFILE, module=module)
        out.append(line)
    if missing:
        out += [cap.first("partial-warn", FOUND_N).fill(FOUND_N, n=found),
                cap.first("partial-warn", MISSING_N).fill(MISSING_N, n=len(missing))]
        name = cap.first("partial-warn", MISSING_NAME)
        out += [name.fill(MISSING_NAME, name=n) for n in missing]
    return out


def directory_lookup(cap: Captured, *, directory: str, module: str, module_id: int, fp: str,
                     exists) -> list[Line]:
    """XLA's lookup of `<directory>/<fp>.pbtxt`, then `.pb`; `exists(path)` answers from the
    files really there. A hit: the captured good-profile block for that file; a miss: the
    lines dir-some-missing.log has for a module without a file (jax >= 0.6.1 logs each miss;
    older ones print nothing)."""
    fpl = cap.first("good-pbtxt", FINGERPRINT).fill(FINGERPRINT, module=module, id=module_id,
                                                    fp=fp)
    out = [fpl]
    missed = _block_without_a_file(cap)
    missing_line = next((ln for ln in missed if re.search(NOT_EXIST, ln.msg)), None)
    for suffix in (".pbtxt", ".pb"):
        f = f"{directory}/{fp}{suffix}"
        if exists(f):
            read = module_read(cap, path=f, module=module, module_id=module_id, fp=fp)
            return out + read[1:]  # its own Fingerprint line is the one above
        if missing_line is not None:
            out.append(missing_line.fill(NOT_EXIST, path=f))
    # After two misses XLA goes on without a profile (0.7.2+: `Using unified latency
    # estimator`): the lines after the misses in the captured block.
    return out + [ln for ln in missed[1:] if not re.search(NOT_EXIST, ln.msg)]


def _block_without_a_file(cap: Captured) -> list[Line]:
    """The lines of the first module dir-some-missing.log has no file for (program b)."""
    blocks = []
    for i in range(64):
        try:
            blocks.append(cap.module_block("dir-some-missing", i))
        except IndexError:
            break
    for block in blocks:
        if not any(re.search(USING, ln.msg) for ln in block):
            return block
    raise LookupError(f"{cap.version}/dir-some-missing.log has no module without a file")


def literal(cap: Captured, scenario: str, pattern: str, old: str, new: str) -> Line:
    """The first line of `scenario` matching `pattern`, with the text `old` (the captured
    path) replaced by `new`: for wordings that differ per version (parse errors)."""
    line = cap.first(scenario, pattern)
    return dataclasses.replace(line, msg=line.msg.replace(old, new))


def captured_profile_path(cap: Captured, scenario: str) -> str:
    """The profile path the lane handed XLA in `scenario` (scenarios.json)."""
    import json

    data = json.loads((cap.dir / "scenarios.json").read_text())
    rows = data["scenarios"] if isinstance(data.get("scenarios"), list) else \
        [dict(v, name=k) for k, v in data["scenarios"].items()]
    row = next(r for r in rows if r["name"] == scenario)
    return row["profile"]["path"]


def default_version(style: str) -> str:
    """absl: jax 0.10.2 (the newest on the project's Python 3.11); tsl: 0.6.2 (the newest tsl
    version whose logs name modules only in the VLOG fingerprint line, as older ones do)."""
    return "0.10.2" if style == "absl" else "0.6.2"
