"""Per-function PGLE profiles for ahead-of-time compiles (`jax.jit(f).lower(...).compile()`).

Auto PGLE never re-optimizes an AOT-compiled executable (pgle-facts.md section 1), but JAX passes
a per-function profile to XLA through `compiler_options={"fdo_profile": bytes}` (binary or text
ProfiledInstructionsProto; jax 0.4.31-0.10.2). XLA logs `Using PGLE profile from fdo_profile
(binary|text)` when it read it, `Unable to parse fdo_profile: ...` when not, and the accuracy
checker's `Missing N instructions` when names do not fit (section 4; seen on the real XLA:GPU
compiler, deviceless, jax 0.10.2).

    from pgle import aot
    step = jax.jit(train_step)
    profile = aot.collect_fdo_profile(step, state, batch, runs=5)   # on the GPU, bytes
    compiled, verdict = aot.compile_with_profile(step, state, batch, profile=profile)
    assert verdict.used, verdict.reasons

XLA's C++ log goes to file descriptor 2, so `compile_with_profile` captures fd 2 around the
compile (and copies it back to stderr). INFO lines need `TF_CPP_MIN_LOG_LEVEL=0` in the
environment before jax is imported; without them the verdict says it could not tell.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import tempfile
from typing import Any

from pgle.errors import ProfileError


@dataclasses.dataclass
class AotVerdict:
    """Whether XLA used the fdo_profile of one compile, from XLA's own log lines."""

    used: bool
    status: str  # used | not used | unparsable | unknown
    profile_format: str | None = None  # binary | text, as XLA reports it
    modules: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    reasons: list[str] = dataclasses.field(default_factory=list)
    log: str = ""


@contextlib.contextmanager
def _captured_fd2(sink: list[str]):
    """Collect what C++ writes to fd 2 (XLA's log) while the block runs; echo it afterwards."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            data = tmp.read()
            os.write(2, data)
            sink.append(data.decode("utf-8", "replace"))


def _profile_bytes(profile: Any) -> bytes:
    if isinstance(profile, (bytes, bytearray)):
        return bytes(profile)
    from pgle.profiles.files import BINARY, Profile, encode_profile, read_profile

    if isinstance(profile, Profile):
        return encode_profile(profile, BINARY)
    return encode_profile(read_profile(profile), BINARY)


def verdict_from_log(text: str) -> AotVerdict:
    """Judge one compile's captured XLA log (lines of `gpu_hlo_schedule.cc` and the checker)."""
    from pgle.evidence import logscan
    from pgle.evidence.xla_log import LogScanner

    fmt = None
    for line in text.splitlines():
        body = line.split("] ", 1)[-1]
        m = logscan.USING_FDO.match(body)
        if m:
            fmt = m.group("fmt")
    evidence = LogScanner().feed_lines(line.encode() for line in text.splitlines())
    modules: list[dict[str, Any]] = [
        {
            "module": m.module,
            "found_profile": m.found_profile,
            "found": m.checker_found,
            "missing": m.checker_missing,
            "missing_names": m.missing_names[:20],
            "discarded": m.discarded,
        }
        for m in evidence.modules
    ]
    reasons: list[str] = []
    if any("fdo_profile" in e for e in evidence.parse_errors):
        return AotVerdict(
            False,
            "unparsable",
            None,
            modules,
            ["XLA could not parse the fdo_profile (not a ProfiledInstructionsProto)."],
            text,
        )
    if fmt is None:
        return AotVerdict(
            False,
            "unknown",
            None,
            modules,
            [
                (
                    "XLA printed no 'Using PGLE profile from fdo_profile' line: set "
                    "TF_CPP_MIN_LOG_LEVEL=0 before importing jax, and compile for a GPU "
                    "(XLA:CPU never reads PGLE profiles)."
                )
            ],
            text,
        )
    for mod in modules:
        if mod["missing"]:
            reasons.append(
                f"module {mod['module']}: {mod['missing']} instructions are not in the profile "
                f"(such as {', '.join(mod['missing_names'][:3])})."
            )
        if mod["discarded"]:
            return AotVerdict(
                False,
                "not used",
                fmt,
                modules,
                reasons
                + [f"XLA discarded the profile for {mod['module']} (accuracy checker at ERROR)."],
                text,
            )
    return AotVerdict(True, "used", fmt, modules, reasons, text)


def compile_with_profile(jitted: Any, *args: Any, profile: Any, **kwargs: Any):
    """`jitted.lower(*args, **kwargs).compile(compiler_options={"fdo_profile": ...})`, and its
    verdict.

    `profile`: bytes (binary or text proto), a pgle Profile, or a .pb/.pbtxt path.
    """
    data = _profile_bytes(profile)
    lowered = jitted.lower(*args, **kwargs)
    log: list[str] = []
    with _captured_fd2(log):
        compiled = lowered.compile(compiler_options={"fdo_profile": data})
    return compiled, verdict_from_log("".join(log))


def collect_fdo_profile(
    jitted: Any, *args: Any, runs: int = 5, warmup: int = 1, stat: str = "median", **kwargs: Any
) -> bytes:
    """Run `jitted(*args)` `warmup` times, then `runs` times under the JAX profiler; return the
    binary profile of its module (pgle's per-module trace converter, `stat` per instruction).

    Raises ProfileError when the trace gives nothing for the function (always on CPU, where XLA
    records no device events; also under Nsight, which holds CUPTI).
    """
    import glob

    import jax

    from pgle.profiles.convert import convert_trace_detailed, parse_stat
    from pgle.profiles.files import BINARY, encode_profile

    stat = parse_stat(stat)
    if runs < 1:
        raise ValueError("runs must be >= 1")
    for _ in range(warmup):
        jax.block_until_ready(jitted(*args, **kwargs))
    with tempfile.TemporaryDirectory(prefix="pgle-aot-") as tmp:
        with jax.profiler.trace(tmp):
            for _ in range(runs):
                jax.block_until_ready(jitted(*args, **kwargs))
        run_dirs = sorted(glob.glob(os.path.join(tmp, "plugins", "profile", "*")))
        if not run_dirs:
            raise ProfileError("the JAX profiler wrote no trace for the function.")
        result = convert_trace_detailed(run_dirs[-1], per_module=True, stat=stat)
    profiles = {fp: p for fp, p in result.profiles.items() if fp and not p.is_empty()}
    if not profiles:
        raise ProfileError(
            "the profiled runs gave an empty profile: XLA recorded no GPU events for "
            "the function (always so on CPU; on a GPU, another CUPTI user such as "
            "Nsight or DCGM can hide them)."
        )
    if len(profiles) > 1:
        # One jitted function is one module; several mean helper modules ran too. Keep the largest.
        fp = max(profiles, key=lambda k: profiles[k].instruction_count)
        profiles = {fp: profiles[fp]}
    return encode_profile(next(iter(profiles.values())), BINARY)
