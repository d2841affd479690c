#!/usr/bin/env python3
"""The XLA:GPU deviceless lane: drive the real XLA:GPU compiler (for an H100 described by a
text GpuTargetConfigProto) on a machine without a GPU, read PGLE profiles in every way a user
can hand them over, and keep the real log lines XLA prints.

Stdlib only. Importable from pytest tests (run_child, run_scenarios, encode_profile, ...) and
runnable:

    python tests/xla_gpu/lane.py --python /path/to/venv/bin/python --out DIR
        [--scenario NAME ...] [--work SCRATCH] [--keep-full-logs]

The interpreter must belong to a virtual environment with jax, jaxlib, jax-cuda12-plugin and
jax-cuda12-pjrt of one version (.ci/xla_gpu_lane.sh makes them). Each scenario is a fresh
child process (tests/xla_gpu/compile_child.py), since XLA reads XLA_FLAGS once per process.
DIR receives <scenario>.log (the PGLE-relevant lines of the child's stderr, see trim_log)
and scenarios.json (flags, environment, profile contents, modules, fingerprints, what the
log says and what is really true).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "compile_child.py")
CAPTURE_DATE = time.strftime("%Y-%m-%d")

# An H100 SXM (sm_90a, 132 SMs, 80 GB HBM3): the device facts of XLA's
# xla/backends/gpu/target_config/specs/h100_sxm.txtpb (openxla/xla), without its
# per-dtype scalar/matrix rate tables. A jaxlib rejects fields it does not know
# (`has no field named "X"`); pgle/estimate/compile_child.topology() removes those and retries, and
# the fields dropped are recorded per version.
H100_SXM_CONFIG = """\
gpu_device_info {
  threads_per_block_limit: 1024
  threads_per_warp: 32
  shared_memory_per_block: 49152
  shared_memory_per_core: 233472
  threads_per_core_limit: 2048
  core_count: 132
  fpus_per_core: 128
  block_dim_limit_x: 2147483647
  block_dim_limit_y: 65535
  block_dim_limit_z: 65535
  memory_bandwidth: 3352320000000
  l2_cache_size: 52428800
  clock_rate_ghz: 1.98
  device_memory_size: 84942979072
  shared_memory_per_block_optin: 232448
  cuda_compute_capability {
    major: 9
    feature_extension: ACCELERATED_FEATURES
  }
  registers_per_core_limit: 65536
  registers_per_block_limit: 65536
  thread_dim_limit_x: 1024
  thread_dim_limit_y: 1024
  thread_dim_limit_z: 64
  device_vendor: "NVIDIA Corporation"
  platform_version: "Compute Capability 9.0a"
  model_str: "sm_9.0a with 84942979072B RAM, 132 cores, 1980000KHz clock, 2619000KHz mem clock, 52428800B L2$"
  device_address_bits: 64
  pcie_bandwidth: 34359738368
  ecc_enabled: true
  name: "NVIDIA H100 80GB HBM3"
  driver_version: "13.0.0"
  runtime_version: "12.8.0"
  compile_time_toolkit_version: "12.8.0"
  dnn_version: "9.10.0"
  cub_version: "3.1.2"
  device_interconnect_info {
    active_links: 18
  }
  collective_memory_granularity: 2097152
}
platform_name: "CUDA"
dnn_version_info {
  major: 8
  minor: 9
  patch: 4
}
device_description_str: "NVIDIA H100 80GB HBM3"
"""

LHS_FLAG = "--xla_gpu_enable_latency_hiding_scheduler=true"
PATH_FLAG = "--xla_gpu_pgle_profile_file_or_directory_path="
CHECKER_WARN = "--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_WARN"
CHECKER_ERROR = "--xla_gpu_pgle_accuracy_checker=PGLE_STRICTNESS_LEVEL_ERROR"
OLD_CHECKER = "--xla_gpu_enable_pgle_accuracy_checker=true"  # removed in jax 0.4.36


# ----------------------------------------------------------------------------- profiles
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len_field(num: int, payload: bytes) -> bytes:
    return _varint((num << 3) | 2) + _varint(len(payload)) + payload


def _double_field(num: int, value: float) -> bytes:
    return _varint((num << 3) | 1) + struct.pack("<d", float(value))


def encode_profile(costs: list[tuple[str, float]],
                   latencies: list[tuple[str, str, float]] = ()) -> bytes:
    """Binary tensorflow.profiler.ProfiledInstructionsProto:
    field 1 repeated costs {string name = 1; double cost_us = 2}
    field 2 repeated latencies {string source = 1; string target = 2; double latency_us = 3}."""
    out = bytearray()
    for name, cost in costs:
        out += _len_field(1, _len_field(1, name.encode()) + _double_field(2, cost))
    for src, dst, lat in latencies:
        out += _len_field(2, _len_field(1, src.encode()) + _len_field(2, dst.encode())
                          + _double_field(3, lat))
    return bytes(out)


def profile_text(costs: list[tuple[str, float]],
                 latencies: list[tuple[str, str, float]] = ()) -> str:
    """The same profile in protobuf text format."""
    lines = [f'costs {{ name: "{n}" cost_us: {c!r} }}' for n, c in costs]
    lines += [f'latencies {{ source: "{s}" target: "{t}" latency_us: {v!r} }}'
              for s, t, v in latencies]
    return "\n".join(lines) + ("\n" if lines else "")


def cost_of(name: str) -> float:
    """Collectives expensive, everything else cheap: a profile that moves the schedule."""
    return 5000.0 if re.match(r"(all-|reduce-scatter|collective-permute)", name) else 50.0


# ----------------------------------------------------------------------------- versions
def vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def probe_version(python: str) -> dict:
    code = ("import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in "
            "('jax', 'jaxlib', 'jax-cuda12-plugin', 'jax-cuda12-pjrt')} | "
            "{'python': sys.version.split()[0]}))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


@dataclass
class Quirks:
    """Per-version workarounds (see tests/data/xla_gpu/README.md)."""
    version: str
    base_flags: list[str] = field(default_factory=list)
    dump: bool = False
    gpu_alias: bool = False
    new_checker: bool = True       # --xla_gpu_pgle_accuracy_checker exists (jax >= 0.4.36)

    @classmethod
    def for_version(cls, version: str) -> "Quirks":
        v = vtuple(version)
        q = cls(version)
        if v <= (0, 8, 3):
            # "INTERNAL: Expect autotune result cache hit for deviceless compilation"
            q.base_flags.append("--xla_gpu_autotune_level=0")
        # Compiled.as_text() is None for compile-only executables up to jax 0.7.2 (seen on
        # 0.4.34-0.7.2; 0.8.3 returns the scheduled HLO): read XLA's dump instead.
        q.dump = v < (0, 8, 0)
        q.gpu_alias = v < (0, 5, 0)  # "Unknown backend: 'gpu' requested"
        q.new_checker = v >= (0, 4, 36)
        return q


# ----------------------------------------------------------------------------- the child
@dataclass
class ChildRun:
    returncode: int
    stderr: str
    modules: list[dict]
    result: dict | None
    xla_flags: str
    env: dict
    seconds: float


BASE_ENV = {
    "JAX_PLATFORMS": "cpu",                     # no CUDA client: the plugin skips cuInit
    "JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1",     # jax 0.6/0.7 check CUDA even then
    "TF_CPP_MIN_LOG_LEVEL": "0",                # XLA's INFO lines
    "TF_CPP_VMODULE": "gpu_hlo_schedule=1",     # "Fingerprint before LHS" (VLOG 1)
}


def venv_env(**extra: str) -> dict[str, str]:
    """The environment of a lane venv's interpreter running pgle from the tree: none of the
    developer's XLA_/TF_CPP_/JAX_/PGLE_ variables, and no PYTHONPATH (this Python's paths hold
    another interpreter's modules). In the mutation run (tests/mutants/score.py) its variables
    stay and PYTHONPATH is PGLE_MUTATION_VENV_PATH (its site folder and mutmut), so the venv
    imports the mutated pgle too: jax >= 0.12's ProfileSession hook is only reached there."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XLA_", "TF_CPP_", "JAX_", "PGLE_")) and k != "PYTHONPATH"}
    env.update({k: v for k, v in os.environ.items() if k.startswith("PGLE_MUTATION_")})
    if os.environ.get("PGLE_MUTATION_VENV_PATH"):
        env["PYTHONPATH"] = os.environ["PGLE_MUTATION_VENV_PATH"]
    env.update(extra)
    return env


def run_child(python: str, xla_flags: list[str], *, work: str, quirks: Quirks,
              programs: str = "a,b,c,d", env_drop: tuple[str, ...] = (),
              env_extra: dict | None = None, fdo_profile: str | None = None,
              cwd: str | None = None, timeout: float = 900, threads: int = 1,
              raise_errors: bool = False, hlo_out: str | None = None) -> ChildRun:
    """One fresh compile process; returns its stderr (XLA's log) and module records."""
    os.makedirs(work, exist_ok=True)
    cfg = os.path.join(work, "h100_sxm.txtpb")
    if not os.path.exists(cfg):
        with open(cfg, "w") as fh:
            fh.write(H100_SXM_CONFIG)
    flags = list(quirks.base_flags) + list(xla_flags)
    args = [python, CHILD, "--config", cfg, "--programs", programs]
    if quirks.dump:
        dump = os.path.join(work, "dump")
        shutil.rmtree(dump, ignore_errors=True)
        flags += [f"--xla_dump_to={dump}", "--xla_dump_hlo_module_re=jit_prog"]
        args += ["--dump", dump]
    if quirks.gpu_alias:
        args.append("--gpu-alias")
    if fdo_profile:
        args += ["--fdo-profile", fdo_profile]
    if threads > 1:
        args += ["--threads", str(threads)]
    if raise_errors:
        args.append("--raise")
    if hlo_out:
        args += ["--hlo-out", hlo_out]
    set_env = {k: v for k, v in BASE_ENV.items() if k not in env_drop}
    set_env.update(env_extra or {})
    set_env["XLA_FLAGS"] = " ".join(flags)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XLA_", "TF_CPP_", "JAX_")) and k != "PYTHONPATH"}
    env.update(set_env)
    t0 = time.time()
    p = subprocess.run(args, env=env, cwd=cwd or work, capture_output=True, text=True,
                       timeout=timeout)
    modules, result = [], None
    for line in p.stdout.splitlines():
        if line.startswith("MODULE "):
            modules.append(json.loads(line[7:]))
        elif line.startswith("RESULT "):
            result = json.loads(line[7:])
    return ChildRun(p.returncode, p.stderr, modules, result, set_env["XLA_FLAGS"], set_env,
                    round(time.time() - t0, 1))


# ----------------------------------------------------------------------------- log reading
TRIM_RE = re.compile(
    r"Fingerprint before LHS|PGLE|[Pp]rofile|Found \d+ instructions|Missing \d+ instructions"
    r"|\]   \S+\s*$|Discarding|[Pp]ars(e|ing)|prase|deviceless|autotune result|Unknown flag"
    r"|LANE-COMPILE-FAILED|latency estimator|^F\d{4}|^\S+ \S+: F |Check failed|Aborted"
    r"|\] Added pair: \{|\] Found async start %"
    r"|^Traceback|^\d+: Traceback|RuntimeError: ")


def trim_log(stderr: str) -> str:
    """Keep only the lines a PGLE verdict is made of."""
    keep = [ln for ln in stderr.splitlines() if TRIM_RE.search(ln)]
    return "\n".join(keep) + ("\n" if keep else "")


FP_RE = re.compile(r"Fingerprint before LHS for module (\S+?)(?:\((\d+)\))? = ([0-9a-f]+)")
USING_RE = re.compile(r"Using PGLE profile (?:for module )?from (.+?)\s*$")
FOUND_PROFILE_RE = re.compile(r"Found profile(?: for module (\S+))?, using profile guided")
FOUND_N_RE = re.compile(r"\] Found (\d+) instructions from the profile")
MISSING_N_RE = re.compile(r"\] Missing (\d+) instructions from the profile")
MISSING_NAME_RE = re.compile(r"\]   (\S+)\s*$")
ERROR_RE = re.compile(
    r"(PGLE profile file does not exist|Tried but failed to parse|Unable to read PGLE"
    r"|Unable to parse fdo_profile|Unable to prase FDO profile|Error parsing text-format"
    r"|missing instructions\. Discarding|Unknown flags? in XLA_FLAGS|LANE-COMPILE-FAILED"
    r"|may not applicable)")


_PREFIX_RE = re.compile(
    r"^(?:(?P<rank>\d+): )?(?:[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+(?P<tid>\d+) "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF](?:\s+(?P<tid2>\d+))? )")
SCHED_LINE = re.compile(r"Fingerprint before LHS|Found profile|Using PGLE profile")


def _thread_of(line: str, use_tid: bool) -> tuple:
    m = _PREFIX_RE.match(line)
    if not m:
        return (None, None)
    return (m.group("rank"), (m.group("tid") or m.group("tid2")) if use_tid else None)


def read_log(stderr: str) -> dict:
    """The lane's own plain reading of a log, per process ("<rank>: " label) and, where the
    scheduler's lines carry thread ids, per thread; in log order within each (a thread
    compiles one module at a time, so a checker block belongs to the module whose lines
    precede it in its thread)."""
    lines = stderr.splitlines()
    use_tid = any(_thread_of(ln, True)[1] for ln in lines if SCHED_LINE.search(ln))
    events: list[dict] = []
    fingerprints: dict[str, str] = {}
    last_missing: dict[tuple, dict] = {}
    for line in lines:
        key = _thread_of(line, use_tid)
        if m := FP_RE.search(line):
            fingerprints.setdefault(m.group(1), m.group(3))
            events.append({"event": "fingerprint", "module": m.group(1), "fp": m.group(3),
                           "id": int(m.group(2)) if m.group(2) else None, "key": key})
        elif m := USING_RE.search(line):
            events.append({"event": "using", "from": m.group(1), "key": key})
        elif m := FOUND_PROFILE_RE.search(line):
            events.append({"event": "found_profile", "module": m.group(1), "key": key})
        elif m := FOUND_N_RE.search(line):
            events.append({"event": "checker_found", "n": int(m.group(1)), "key": key})
        elif m := MISSING_N_RE.search(line):
            ev = {"event": "checker_missing", "n": int(m.group(1)), "names": [], "key": key}
            events.append(ev)
            last_missing[key] = ev
        elif (m := MISSING_NAME_RE.search(line)) and key in last_missing \
                and len(last_missing[key]["names"]) < last_missing[key]["n"]:
            last_missing[key]["names"].append(m.group(1))
        if ERROR_RE.search(line):
            events.append({"event": "error", "line": re.sub(r"^.*?\] ", "", line)[:400],
                           "key": key})
    # Fold into per-module records, per thread: a module's lines start at its fingerprint
    # line (VLOG on) or at the "Found profile" line that names it. jax 0.4.34/0.4.35 log the
    # checker block in absl style (with a thread id) among tsl lines without one: without
    # thread ids on the scheduler lines, the process is one thread.
    per_module: list[dict] = []
    cur: dict[tuple, dict] = {}
    for ev in events:
        e, key = ev["event"], ev["key"]
        c = cur.get(key)
        if e == "fingerprint" or (e == "found_profile" and (c is None or c.get("found_profile"))):
            c = cur[key] = {"module": ev.get("module"), "fingerprint": ev.get("fp")}
            if ev.get("id") is not None:
                c["id"] = ev["id"]
            if key[0] is not None:
                c["rank"] = int(key[0])
            if key[1] is not None:
                c["thread"] = int(key[1])
            per_module.append(c)
        if c is None:
            c = cur[key] = {"module": None, "fingerprint": None}
            per_module.append(c)
        if e == "using":
            c.setdefault("using", []).append(ev["from"])
        elif e == "found_profile":
            c["found_profile"] = True
            if ev["module"]:
                c["module"] = c["module"] or ev["module"]
        elif e == "checker_found":
            c["checker_found"] = ev["n"]
        elif e == "checker_missing":
            c["checker_missing"] = ev["n"]
            c["missing_names"] = ev["names"]
        elif e == "error":
            c.setdefault("errors", []).append(ev["line"])
    return {"fingerprints": fingerprints, "modules": per_module}


# ----------------------------------------------------------------------------- scenarios
@dataclass
class Scenario:
    name: str
    intent: str
    flags: list[str]
    profile: dict | None = None          # {"kind", "path", "files": {relpath: content}}
    env_drop: tuple[str, ...] = ()
    fdo: str | None = None               # relpath of the file handed as fdo_profile
    cwd_rel: str | None = None           # run the child there (relative-path scenario)
    programs: str = "a,b,c,d"
    threads: int = 1                     # compile from this many Python threads at once
    raise_errors: bool = False           # the compile error ends the child with a traceback
    env_extra: dict = field(default_factory=dict)
    # Two processes ("ranks") of one job: the second adds these flags; the log is what
    # `srun --label` prints (each line prefixed "<rank>: ", interleaved by time).
    rank1_flags: list[str] | None = None


def _names_of(mod: dict) -> list[str]:
    """The names a real profile of the module would hold: its entry computation, its while
    bodies and conditions (the accuracy checker also asks for the condition's
    loop_compare_fusion), and the conditional branch that runs (program b's light branch: the
    one without a matmul); the heavy branch never runs, so a real profile cannot name its
    instructions."""
    names = list(mod.get("entry_instructions") or [])
    for body in (mod.get("while_bodies") or {}).values():
        names += body
    for cond in (mod.get("while_conditions") or {}).values():
        names += cond
    for branch in (mod.get("cond_branches") or {}).values():
        if not any(re.search(r"gemm|dot|cublas", n) for n in branch):
            names += branch
    # Instructions of called computations (jax 0.5.3/0.6.2 schedule a `call` in prog_d_train
    # and check the instructions inside it). Names of fused computations come along too;
    # extra names in a profile are harmless (the checker only asks module -> profile).
    for comp in (mod.get("other_computations") or {}).values():
        names += comp
    seen, out = set(), []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


def build_scenarios(base_modules: list[dict], log_fps: dict[str, str], quirks: Quirks,
                    work: str) -> list[Scenario]:
    """Profiles built from the baseline compile's modules, and the scenarios that use them."""
    prof = os.path.join(work, "profiles")
    mods = [m for m in base_modules if m.get("fingerprint_before_lhs")]
    all_costs: list[tuple[str, float]] = []
    seen: set[str] = set()
    for m in mods:
        for n in _names_of(m):
            if n not in seen:
                seen.add(n)
                all_costs.append((n, cost_of(n)))
    per_fp = {m["fingerprint_before_lhs"]: [(n, cost_of(n)) for n in _names_of(m)] for m in mods}
    if not any(m["program"] == "a" for m in mods):
        raise RuntimeError("no fingerprint/HLO for program a: as_text() was None and no dump "
                           "was read (see Quirks.dump)")
    a = next(m for m in mods if m["program"] == "a")
    one = [n for n in _names_of(a) if re.search(r"fusion|all-gather-start|custom-call", n)][:1]
    partial = [(n, cost_of(n)) for n in one]
    clones = {name: fp for name, fp in log_fps.items() if name.endswith("-clone")}
    fp_of = {m["module"]: m["fingerprint_before_lhs"] for m in mods}

    lhs = [LHS_FLAG]
    warn = [CHECKER_WARN] if quirks.new_checker else []
    error = [CHECKER_ERROR] if quirks.new_checker else [OLD_CHECKER]

    def file_s(name, intent, rel, content, flags=(), **kw):  # noqa: ANN001
        return Scenario(name, intent, lhs + [PATH_FLAG + os.path.join(prof, rel)] + list(flags),
                        {"kind": "file", "path": os.path.join(prof, rel), "files": {rel: content}},
                        **kw)

    def dir_s(name, intent, rel, files, flags=()):
        return Scenario(name, intent, lhs + [PATH_FLAG + os.path.join(prof, rel)] + list(flags),
                        {"kind": "directory", "path": os.path.join(prof, rel),
                         "files": {f"{rel}/{k}": v for k, v in files.items()}})

    good_txt = profile_text(all_costs)
    s = [
        Scenario("no-profile", "baseline: no profile flag", lhs),
        file_s("good-pbtxt", "text .pbtxt holding every name a real profile of each module "
               "would hold (entry, while bodies and conditions, the taken branch)",
               "good.pbtxt", good_txt),
        file_s("good-pb", "binary .pb, same names", "good.pb", encode_profile(all_costs)),
        dir_s("dir-pb", "directory with <fp>.pb for each module's as_text() fingerprint "
              "(no file for -clone modules); XLA looks for <fp>.pbtxt first",
              "dir-pb", {f"{fp}.pb": encode_profile(c) for fp, c in per_fp.items()}),
        dir_s("dir-pbtxt", "directory with <fp>.pbtxt for each module's fingerprint",
              "dir-pbtxt", {f"{fp}.pbtxt": profile_text(c) for fp, c in per_fp.items()}),
        file_s("fp-qualified", "one .pbtxt, every name qualified '<module fp>::name'",
               "fpq.pbtxt", profile_text([(f"{fp}::{n}", c) for fp, cs in per_fp.items()
                                          for n, c in cs])),
        file_s("fp-other", "one .pbtxt, every name qualified with another fingerprint '000..0::'",
               "fpo.pbtxt", profile_text([(f"{'0' * 32}::{n}", c) for n, c in all_costs])),
        file_s("partial-warn", f"1 name ({one}) under the WARN checker"
               + ("" if quirks.new_checker else " (no checker flag: it does not exist here)"),
               "partial.pbtxt", profile_text(partial), warn),
        file_s("partial-error", f"1 name ({one}) under the ERROR checker"
               + ("" if quirks.new_checker else f" (old {OLD_CHECKER}, strict)"),
               "partial.pbtxt", profile_text(partial), error),
        file_s("empty", "empty .pbtxt file", "empty.pbtxt", ""),
        Scenario("absent", "path of a file that does not exist",
                 lhs + [PATH_FLAG + os.path.join(prof, "absent.pbtxt")],
                 {"kind": "file", "path": os.path.join(prof, "absent.pbtxt"), "files": {}}),
        file_s("garbage-pbtxt", "a .pbtxt that is not a text proto", "garbage.pbtxt",
               "this is { not a proto\n"),
        file_s("garbage-pb", "a .pb that is not a binary proto", "garbage.pb",
               b"\xff\xff\xff\xffnot a proto"),
        file_s("wrong-extension", "good text profile in a .txt file", "good.txt", good_txt),
        dir_s("dir-no-match", "directory holding only an unrelated <fp>.pbtxt", "dir-nomatch",
              {f"{'0123456789abcdef' * 2}.pbtxt": good_txt}),
        Scenario("fdo-pbtxt", "text profile handed as CompileOptions.fdo_profile (auto PGLE's "
                 "path), no path flag", lhs, {"kind": "fdo_profile", "path": None,
                                              "files": {"fdo.pbtxt": good_txt}}, fdo="fdo.pbtxt"),
        Scenario("fdo-pb", "binary profile as fdo_profile", lhs,
                 {"kind": "fdo_profile", "path": None,
                  "files": {"fdo.pb": encode_profile(all_costs)}}, fdo="fdo.pb"),
        Scenario("fdo-garbage", "garbage bytes as fdo_profile", lhs,
                 {"kind": "fdo_profile", "path": None,
                  "files": {"fdo-garbage.bin": "this is { not a proto\n"}}, fdo="fdo-garbage.bin"),
        file_s("no-log-level", "good .pbtxt, TF_CPP_MIN_LOG_LEVEL not set", "good.pbtxt",
               good_txt, env_drop=("TF_CPP_MIN_LOG_LEVEL",)),
        file_s("no-vmodule", "good .pbtxt, TF_CPP_VMODULE not set", "good.pbtxt", good_txt,
               env_drop=("TF_CPP_VMODULE",)),
        Scenario("no-lhs-flag", "good .pbtxt without --xla_gpu_enable_latency_hiding_scheduler",
                 [PATH_FLAG + os.path.join(prof, "good.pbtxt")],
                 {"kind": "file", "path": os.path.join(prof, "good.pbtxt"),
                  "files": {"good.pbtxt": good_txt}}),
        Scenario("relative-path", "good .pbtxt given as a relative path (child cwd = profiles/)",
                 lhs + [PATH_FLAG + "good.pbtxt"],
                 {"kind": "file", "path": "good.pbtxt", "files": {"good.pbtxt": good_txt}},
                 cwd_rel="."),
        Scenario("unknown-checker-flag",
                 "the accuracy-checker flag of the other generation ("
                 + ("old --xla_gpu_enable_pgle_accuracy_checker, removed in 0.4.36"
                    if quirks.new_checker else
                    "new --xla_gpu_pgle_accuracy_checker, added in 0.4.36") + ")",
                 lhs + [PATH_FLAG + os.path.join(prof, "good.pbtxt"),
                        OLD_CHECKER if quirks.new_checker else CHECKER_WARN],
                 {"kind": "file", "path": os.path.join(prof, "good.pbtxt"),
                  "files": {"good.pbtxt": good_txt}}),
    ]
    by_prog = {m["program"]: m for m in mods}
    main4 = [m for m in mods if m["program"] in "abcd"]
    # Every other name of each module: each module misses some (a checker block per module).
    half = {m["fingerprint_before_lhs"]: [(n, cost_of(n)) for n in _names_of(m)[::2]]
            for m in main4}
    half_txt = profile_text([c for cs in half.values() for c in cs])
    some = {m["fingerprint_before_lhs"]: profile_text(per_fp[m["fingerprint_before_lhs"]])
            for m in main4 if m["program"] in "ac"}
    s += [
        dir_s("dir-some-missing", "directory with <fp>.pbtxt for programs a and c only "
              "(none for b, d_train, d_eval)", "dir-some",
              {f"{fp}.pbtxt": t for fp, t in some.items()}),
        dir_s("dir-pbtxt-fallback", "directory where each <fp>.pbtxt is not a text proto and "
              "<fp>.pb is the module's good binary profile (XLA falls back to the .pb)",
              "dir-fallback",
              {**{f"{fp}.pbtxt": "this is { not a proto\n" for fp in per_fp},
               **{f"{fp}.pb": encode_profile(c) for fp, c in per_fp.items()}}),
        dir_s("dir-empty", "an empty directory", "dir-empty", {}),
        file_s("gzip-pb", "the good binary profile gzip-compressed, named .pb", "gzip.pb",
               gzip.compress(encode_profile(all_costs), mtime=0)),
        file_s("good-error", "the good .pbtxt under the ERROR checker (compiles only if the "
               "profile covers every module: the proof that a silent WARN checker means full)",
               "good.pbtxt", good_txt, error),
        file_s("fp-other-error", "names qualified with another fingerprint, ERROR checker",
               "fpo.pbtxt", profile_text([(f"{'0' * 32}::{n}", c) for n, c in all_costs]),
               error),
        file_s("threads", "every other name of each module (each misses some, WARN), the "
               "five modules compiled at once from five Python threads; TF_CPP_LOG_THREAD_ID=1",
               "half.pbtxt", half_txt, warn, threads=5,
               env_extra={"TF_CPP_LOG_THREAD_ID": "1"}),
        file_s("runtime-error", "1 name of program a under the ERROR checker; the compile "
               "error is not caught: Python's traceback ends the process",
               "partial.pbtxt", profile_text(partial), error, programs="a",
               raise_errors=True),
        file_s("collectives-all", "good .pbtxt for programs e-h (collective-permute, "
               "all-to-all, a while loop with a nested scan, no collectives, GSPMD)",
               "good.pbtxt", good_txt, programs="e,f,g,h"),
        dir_s("ranks-divergent", "two processes (ranks) of one job, a directory keyed by rank "
              "0's fingerprints (programs a, c); rank 1 adds --xla_gpu_enable_triton_gemm=false, "
              "which changes its fingerprints; the log is what `srun --label` prints",
              "dir-ranks", {f"{fp}.pbtxt": t for fp, t in some.items()}),
    ]
    s[-1].programs = "a,c"
    s[-1].rank1_flags = ["--xla_gpu_enable_triton_gemm=false"]
    # After scheduling, XLA makes an async collective nothing overlaps synchronous; jax >=
    # 0.11.1 gives it a new name (all-reduce-start -> all-reduce.6), so that no profile can hold
    # the name the accuracy checker asks for. The pass's VLOG 3 lines (`Found async start %S`,
    # `Added pair: {S, D`) show which it converted: programs d (all-reduce), e (a
    # collective-permute), h (all-gather, reduce-scatter); a keeps its collectives async.
    sync_env = {"TF_CPP_VMODULE": "gpu_hlo_schedule=1,convert_async_collectives_to_sync=3"}
    a_fp = by_prog["a"]["fingerprint_before_lhs"]
    gather = next((n for n, _ in per_fp[a_fp] if n.startswith("all-gather-start")), None)
    less = {fp: [(n, c) for n, c in cs if not (fp == a_fp and n == gather)]
            for fp, cs in per_fp.items() if fp in {m["fingerprint_before_lhs"] for m in mods
                                                   if m["program"] in "ad"}}
    s += [
        dir_s("sync-converted", "directory with <fp>.pbtxt for each module (as dir-pbtxt), "
              "programs a, d, e, h, with convert_async_collectives_to_sync=3 in TF_CPP_VMODULE",
              "dir-pbtxt", {f"{fp}.pbtxt": profile_text(c) for fp, c in per_fp.items()}),
        dir_s("sync-converted-missing", f"as sync-converted for programs a and d, program a's "
              f"file without {gather} (an async collective XLA keeps async)", "dir-sync-missing",
              {f"{fp}.pbtxt": profile_text(c) for fp, c in less.items()}),
    ]
    s[-2].programs, s[-2].env_extra = "a,d,e,h", dict(sync_env)
    s[-1].programs, s[-1].env_extra = "a,d", dict(sync_env)
    if quirks.new_checker:
        s.append(Scenario("checker-no-path", "the WARN checker flag without a profile path",
                          lhs + [CHECKER_WARN], programs="a"))
    if "i" in by_prog:
        s.append(file_s("send-recv", "good .pbtxt for program i (jax.lax.psend/precv: send and "
                        "recv in the HLO)", "good.pbtxt", good_txt, programs="i"))
    if clones:
        # jax 0.7.2 / 0.8.3: a <module>-clone is scheduled per compile, with its own fingerprint.
        files = {f"{fp}.pbtxt": profile_text(c) for fp, c in per_fp.items()}
        for cname, cfp in clones.items():
            main = cname[: -len("-clone")]
            if fp_of.get(main) in per_fp:
                files[f"{cfp}.pbtxt"] = profile_text(per_fp[fp_of[main]])
        s.append(dir_s("dir-pbtxt-with-clones", "directory with <fp>.pbtxt for each module AND "
                       "for each -clone fingerprint (clone gets its main module's names)",
                       "dir-clones", files))
        s.append(file_s("fp-qualified-clone", "one .pbtxt, names qualified with the -clone "
                        "fingerprints only", "fpq-clone.pbtxt",
                        profile_text([(f"{cfp}::{n}", c) for cname, cfp in clones.items()
                                      if fp_of.get(cname[:-6]) in per_fp
                                      for n, c in per_fp[fp_of[cname[:-6]]]])))
        s.append(Scenario("no-clone-combiner", "good .pbtxt with "
                          "--xla_gpu_experimental_enable_heuristic_collective_combining=false",
                          lhs + [PATH_FLAG + os.path.join(prof, "good.pbtxt"),
                                 "--xla_gpu_experimental_enable_heuristic_collective_combining=false"],
                          {"kind": "file", "path": os.path.join(prof, "good.pbtxt"),
                           "files": {"good.pbtxt": good_txt}}))
    return s


BASE_PROGRAMS = "a,b,c,d,e,f,g,h"
_STAMP = re.compile(r"^[IWEF](\d{4} \d\d:\d\d:\d\d\.\d+)|^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+):")


def label_and_merge(logs: list[str]) -> str:
    """What `srun --label` prints for several processes: each line prefixed "<rank>: ",
    the processes' lines interleaved in time (a line without a time stamp keeps its place
    after the line before it)."""
    keyed = []
    for rank, text in enumerate(logs):
        last = ""
        for i, line in enumerate(text.splitlines()):
            m = _STAMP.match(line)
            if m:
                last = m.group(1) or m.group(2)
            keyed.append((last, rank, i, f"{rank}: {line}"))
    keyed.sort()
    return "".join(k[3] + "\n" for k in keyed)


def run_ranks(python: str, sc: Scenario, work: str, quirks: Quirks) -> ChildRun:
    """Two processes of one job, rank 1 with extra flags; one `srun --label` log."""
    runs = [run_child(python, sc.flags + extra, work=os.path.join(work, f"rank{r}"),
                      quirks=quirks, programs=sc.programs)
            for r, extra in enumerate(([], sc.rank1_flags or []))]
    mods = [dict(m, rank=r) for r, run in enumerate(runs) for m in run.modules]
    ok = all(run.result and run.result.get("ok") for run in runs)
    return ChildRun(max(run.returncode for run in runs),
                    label_and_merge([run.stderr for run in runs]), mods,
                    {"ok": ok, "ranks": [run.result for run in runs]} if ok else None,
                    runs[0].xla_flags + " | rank 1: " + runs[1].xla_flags, runs[0].env,
                    round(sum(run.seconds for run in runs), 1))


def _write_profile(work: str, sc: Scenario) -> None:
    if not sc.profile:
        return
    prof = os.path.join(work, "profiles")
    if sc.profile["kind"] == "directory" and sc.profile["path"]:
        os.makedirs(sc.profile["path"], exist_ok=True)  # an empty directory too
    for rel, content in sc.profile["files"].items():
        p = os.path.join(prof, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as fh:
            fh.write(content if isinstance(content, bytes) else content.encode())


def _show(content) -> str:
    if isinstance(content, bytes):
        return "hex:" + content.hex() if len(content) <= 64 else \
            f"binary ProfiledInstructionsProto, {len(content)} bytes"
    return content if len(content) <= 600 else content[:600] + f"... ({len(content)} chars)"


def schedules(run: ChildRun) -> dict[str, list[str]]:
    """Each module's scheduled instruction order (entry, then while bodies)."""
    out = {}
    for m in run.modules:
        if m.get("entry_instructions"):
            order = list(m["entry_instructions"])
            for body in (m.get("while_bodies") or {}).values():
                order += body
            out[m["module"]] = order
    return out


# Scenarios whose log hides what happened (INFO or VLOG off): their truth is that of the
# scenario with the same flags and profile and a full log.
SAME_AS = {"no-log-level": "good-pbtxt", "no-vmodule": "good-pbtxt"}


def facts_of(sc: Scenario, run: ChildRun, seen: dict, quirks: Quirks, ref: dict,
             expected: list[str] | None = None) -> dict:
    """What really happened in one scenario: the exit status, the child's own compile
    results, XLA's full log (not only the trimmed lines) and the schedule XLA produced,
    compared with the schedules of the no-profile and good-pbtxt runs (`ref`)."""
    mods = seen["modules"]
    failed = [m for m in run.modules if m.get("compile_failed")]
    raised = run.result is None and "Traceback (most recent call last)" in run.stderr
    if raised:
        # --raise: the compile error ended the child before it printed its modules; the
        # scenario compiles one program, whose module the traceback's error belongs to.
        last = [ln for ln in run.stderr.splitlines() if re.match(r"^[\w.]+(Error|Exception): ", ln)]
        failed = [{"module": expected[0] if expected else None,
                   "error": last[-1] if last else "Traceback"}]
    aborted = run.result is None and not raised
    errors = [e for m in mods for e in m.get("errors", [])]
    user_names = {m.get("module") for m in run.modules} or set(expected or ())
    sched = schedules(run)
    like = {}
    for name, order in sched.items():
        base = ref.get("no-profile", {}).get(name)
        good = ref.get("good-pbtxt", {}).get(name)
        tags = [t for t, o in (("no-profile", base), ("good-pbtxt", good)) if o == order]
        like[name] = tags or ["neither"]
    per_module = []
    for m in mods:
        rec = {k: m.get(k) for k in ("module", "fingerprint", "id", "rank", "thread", "using",
                                     "found_profile", "checker_found", "checker_missing")
               if m.get(k) is not None}
        # The workload's own modules are those the child compiled; every other module in
        # the log is one XLA scheduled while compiling them (jax 0.7.2/0.8.3: the collective
        # combiner's -clone; jax >= 0.11: the autotuner's candidates).
        if m.get("module") and user_names and m["module"] not in user_names:
            rec["sub_compile"] = True
        if m.get("errors"):
            rec["errors"] = sorted(set(m["errors"]))[:4]
        per_module.append(rec)
    return {
        "exit_code": run.returncode,
        "process_aborted": aborted,
        "raised_traceback": raised,
        "compile_failed": bool(failed) or aborted,
        "failed_modules": [{"module": m["module"], "error": m.get("error")} for m in failed],
        "log_shows_profile_read": any(m.get("using") or m.get("found_profile") for m in mods),
        "log_error_lines": sorted(set(errors))[:10],
        "log_per_module": per_module,
        "schedule_like": like,
        "truth_same_as": SAME_AS.get(sc.name),
    }


def _module_delta(m: dict, base: dict | None) -> dict:
    """A scenario's compiled module against the no-profile compile of the same module: on jax
    0.7.2/0.8.3 a profile read for the -clone changes the main module's HLO (fingerprint and
    instruction names)."""
    rec = {k: m.get(k) for k in ("module", "fingerprint_before_lhs", "compile_failed", "error")
           if k in m}
    if base and m.get("fingerprint_before_lhs") and base.get("fingerprint_before_lhs"):
        rec["fingerprint_same_as_no_profile"] = (
            m["fingerprint_before_lhs"] == base["fingerprint_before_lhs"])
        now, before = set(_names_of(m)), set(_names_of(base))
        if now != before:
            rec["names_not_in_no_profile_run"] = sorted(now - before)
            rec["names_gone_since_no_profile_run"] = sorted(before - now)
    return rec


def run_scenarios(python: str, out: str, work: str, only: list[str] | None = None,
                  keep_full: bool = False, log=print) -> dict:
    """Run the baseline, build the profiles, run every scenario; write out/*.log and
    out/scenarios.json. Returns the scenarios.json document."""
    versions = probe_version(python)
    quirks = Quirks.for_version(versions["jax"])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.makedirs(out, exist_ok=True)
    log(f"lane: jax {versions['jax']}: baseline compile")
    base = run_child(python, [LHS_FLAG], work=work, quirks=quirks, programs=BASE_PROGRAMS)
    if base.result is None or not base.result.get("ok"):
        sys.stderr.write(base.stderr[-6000:])
        raise RuntimeError(f"jax {versions['jax']}: the baseline compile failed "
                           f"(exit {base.returncode}); see the log above")
    # Send/recv (program i) needs jax.lax.psend/precv and a plugin that takes them.
    send_recv = run_child(python, [LHS_FLAG], work=work, quirks=quirks, programs="i")
    send_recv_ok = bool(send_recv.result and send_recv.result.get("ok") and send_recv.modules)
    if send_recv_ok:
        base.modules += send_recv.modules
        base.stderr += send_recv.stderr
    seen = read_log(base.stderr)
    doc: dict = {
        "jax": versions["jax"], "versions": versions, "captured": CAPTURE_DATE,
        "target": "H100 SXM (xla/backends/gpu/target_config/specs/h100_sxm.txtpb, "
                  "without rate tables), topology 1x1x8",
        "device_kind": base.result.get("device_kind"),
        "dropped_config_fields": base.result.get("dropped_config_fields"),
        "quirks": {"base_flags": quirks.base_flags, "xla_dump_for_hlo": quirks.dump,
                   "gpu_platform_alias": quirks.gpu_alias,
                   "has_xla_gpu_pgle_accuracy_checker": quirks.new_checker},
        "base_env": BASE_ENV,
        "work_dir": work,
        "modules": [
            {"module": m["module"], "program": m["program"],
             "fingerprint_before_lhs": m.get("fingerprint_before_lhs"),
             "hlo_source": m.get("hlo_source"),
             "entry_instructions": m.get("entry_instructions"),
             "while_bodies": m.get("while_bodies"),
             "while_conditions": m.get("while_conditions"),
             "cond_branches": sorted((m.get("cond_branches") or {}).keys()),
             "compile_s": m.get("compile_s")} for m in base.modules],
        "log_fingerprints": seen["fingerprints"],
        "send_recv": {"reachable": send_recv_ok, "why_not": None if send_recv_ok else (
            (send_recv.modules[0].get("error") if send_recv.modules else None)
            or "jax.lax.psend does not exist" if not send_recv.modules
            else send_recv.modules[0].get("error"))},
        "profiles": {},     # relpath under work_dir/profiles -> contents (abridged)
        "scenarios": {},
    }
    scen = build_scenarios(base.modules, seen["fingerprints"], quirks, work)
    ref: dict = {"no-profile": schedules(base)}
    base_by_name = {m["module"]: m for m in base.modules}
    for sc in scen:
        if only and sc.name not in only:
            continue
        _write_profile(work, sc)
        prof = os.path.join(work, "profiles")
        if sc.name == "no-profile":
            run = base
        elif sc.rank1_flags is not None:
            run = run_ranks(python, sc, work, quirks)
        else:
            run = run_child(python, sc.flags, work=work, quirks=quirks, env_drop=sc.env_drop,
                            fdo_profile=os.path.join(prof, sc.fdo) if sc.fdo else None,
                            cwd=os.path.join(prof, sc.cwd_rel) if sc.cwd_rel else None,
                            programs=sc.programs, threads=sc.threads,
                            raise_errors=sc.raise_errors, env_extra=sc.env_extra)
        full = read_log(run.stderr)
        trimmed = trim_log(run.stderr)
        with open(os.path.join(out, f"{sc.name}.log"), "w") as fh:
            fh.write(trimmed)
        if keep_full:
            os.makedirs(os.path.join(out, "full"), exist_ok=True)
            with open(os.path.join(out, "full", f"{sc.name}.log"), "w") as fh:
                fh.write(run.stderr)
        if sc.name == "good-pbtxt":
            ref["good-pbtxt"] = schedules(run)
        entry = {
            "intent": sc.intent,
            "xla_flags": run.xla_flags,
            "env_unset": [k for k in BASE_ENV if k not in run.env],
            **({"env_set": extra} if (extra := {k: v for k, v in run.env.items()
                                                 if k != "XLA_FLAGS" and BASE_ENV.get(k) != v})
               else {}),
            "cwd": os.path.join(prof, sc.cwd_rel) if sc.cwd_rel else work,
            "profile": None if not sc.profile else {
                "kind": sc.profile["kind"], "path": sc.profile["path"],
                "files": sorted(sc.profile["files"])},
            "fdo_profile_passed_by": (run.result or {}).get("fdo_mode") if sc.fdo else None,
            "modules": [_module_delta(m, base_by_name.get(m.get("module"))) for m in run.modules],
            "seconds": run.seconds,
            "facts": facts_of(sc, run, full, quirks, ref,
                              [m["module"] for m in base.modules if m["program"] in sc.programs]),
        }
        for rel, content in (sc.profile or {}).get("files", {}).items():
            doc["profiles"].setdefault(rel, _show(content))
        doc["scenarios"][sc.name] = entry
        f = entry["facts"]
        log(f"lane: jax {versions['jax']}: {sc.name:24s} exit={run.returncode} "
            f"log-read={f['log_shows_profile_read']} failed={f['compile_failed']} "
            f"{run.seconds}s")
    with open(os.path.join(out, "scenarios.json"), "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
        fh.write("\n")
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True, help="interpreter of a jax lane venv")
    ap.add_argument("--out", required=True, help="where <scenario>.log and scenarios.json go")
    ap.add_argument("--work", help="scratch directory (profiles, dumps); wiped first "
                    "(default /tmp/pgle-lane/<jax version>)")
    ap.add_argument("--scenario", action="append", help="run only these (repeatable)")
    ap.add_argument("--keep-full-logs", action="store_true",
                    help="also keep each child's whole stderr under OUT/full/")
    ap.add_argument("--merge-into", metavar="DIR",
                    help="add the scenarios run (--scenario) to the capture in DIR (its "
                    "scenarios.json and logs), once this run's baseline compile is shown to "
                    "be the same as DIR's (same modules, fingerprints and instruction names)")
    ns = ap.parse_args(argv)
    version = probe_version(ns.python)["jax"]
    work = ns.work or os.path.join("/tmp/pgle-lane", version)
    t0 = time.time()
    doc = run_scenarios(ns.python, ns.out, work, ns.scenario, ns.keep_full_logs)
    if ns.merge_into:
        merge_into(doc, ns.out, ns.merge_into)
    print(f"lane: jax {version}: done in {time.time() - t0:.0f} s -> {ns.merge_into or ns.out}")
    return 0


def merge_into(doc: dict, out: str, target: str) -> None:
    """Add the scenarios of `doc` (run into `out`) to the capture in `target`: refused unless
    this run's baseline compile equals the captured one (XLA compiles deterministically, so the
    new scenarios belong to the same modules); each added scenario records its own date."""
    path = os.path.join(target, "scenarios.json")
    with open(path) as fh:
        old = json.load(fh)
    def same(d: dict) -> list:
        return [(m["module"], m.get("fingerprint_before_lhs"), m.get("entry_instructions"),
                 m.get("while_bodies")) for m in d["modules"]]
    if same(old) != same(doc) or old["jax"] != doc["jax"]:
        raise SystemExit(f"lane: {target}: the baseline compile differs from the captured "
                         "one; capture the whole version again instead")
    for name, entry in doc["scenarios"].items():
        if name == "no-profile":
            continue
        old["scenarios"][name] = dict(entry, captured=doc["captured"])
        shutil.copyfile(os.path.join(out, f"{name}.log"), os.path.join(target, f"{name}.log"))
    for rel, shown in doc["profiles"].items():
        old["profiles"].setdefault(rel, shown)
    with open(path, "w") as fh:
        json.dump(old, fh, indent=1, sort_keys=False)
        fh.write("\n")


if __name__ == "__main__":
    sys.exit(main())
