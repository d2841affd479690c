"""Whether XLA:GPU evidence in a log can come from the run pgle knows about.

A verdict counts XLA's lines only when they are consistent with what pgle itself saw: a
workload that prints (or copies) XLA:GPU log lines must not get `applied`. What is
checkable, from pgle's own records of the run (the harness inside the workload process, and
the plan pgle launched):
- the platforms XLA compiled for: the harness sees every compile (`compile_or_get_cached`
  and the backend it is handed: `gpu` for a GPU run, deviceless compiles included; `cpu`
  otherwise). XLA:GPU's scheduler runs only in a GPU compile, so its lines in a run that
  compiled for no GPU were not printed by this run's XLA;
- the threads that logged them: absl's prefix (jax >= 0.7.2; tsl's with
  TF_CPP_LOG_THREAD_ID) carries the logging thread's id, not the process id. XLA schedules a
  module in the thread that called the compile (seen on jax 0.4.35-0.12.0.1 in the lane,
  threads included), and the harness records the native id of each thread that compiled;
  lines none of whose thread ids is one of those were printed by another process;
- the profile: `Using PGLE profile from <path>` must name the path pgle handed over (as given,
  or inside the directory given, or pgle's content-addressed copy of it); a read of another
  file, or of an `fdo_profile` that JAX's auto PGLE handed over (it wins over the flag), is not
  the user's profile.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

from pgle.evidence.xla_log import Evidence
from pgle.phrases import listed, plural

GPU_PLATFORMS = ("gpu", "cuda", "rocm")


@dataclasses.dataclass(frozen=True)
class Origin:
    """What pgle knows about the run that wrote a log; None fields are unknown (not checked)."""

    # Platforms of every compile the harness saw (None: no harness record, e.g. `verify`).
    compile_platforms: tuple[str, ...] | None = None
    # Native ids of the threads that called XLA's compile, and the process id.
    compile_threads: tuple[str, ...] = ()
    # Whether a read names the profile pgle handed over (None: any read counts).
    profile_match: Callable[[str], bool] | None = None
    profile_given: str | None = None  # how to name it in a reason

    def foreign_log(self, evidence: Evidence) -> str | None:
        """Why none of the log's XLA:GPU evidence can be this run's, or None."""
        if not (evidence.pgle_lines or evidence.modules or evidence.sub_compiles):
            return None
        if self.compile_platforms is not None:
            gpu = [p for p in self.compile_platforms if p.lower() in GPU_PLATFORMS]
            if not gpu:
                what = (
                    f"compiled only for {', '.join(sorted(set(self.compile_platforms)))}"
                    if self.compile_platforms
                    else "compiled nothing"
                )
                return (
                    f"the log holds {plural(evidence.pgle_lines, 'XLA:GPU scheduler line')}, "
                    "but this "
                    f"run {what} (pgle's harness sees every compile): XLA:GPU did not print "
                    "them in this run (the workload printed or copied them), so nothing of "
                    "this run used a profile; PGLE is an XLA:GPU feature."
                )
        threads = set(evidence.thread_ids)
        if threads and self.compile_threads and not threads & set(self.compile_threads):
            shown = listed(sorted(threads), 4)  # "... and N more": none dropped unsaid
            return (
                f"the log's XLA:GPU lines come from thread{'' if len(threads) == 1 else 's'} "
                f"{shown}, "
                "none of which compiled anything in this run (pgle's harness records the "
                f"id of every thread that compiled: {listed(list(self.compile_threads), 4)}): "
                "another process printed them, so they are not counted."
            )
        return None

    def foreign_reads(self, evidence: Evidence) -> dict[str, str]:
        """{path read: why it does not count} for reads of something else than the profile."""
        if self.profile_match is None:
            return {}
        out: dict[str, str] = {}
        for path in dict.fromkeys(evidence.reads):
            if self.profile_match(path):
                continue
            if path.startswith("fdo_profile"):
                out[path] = (
                    "XLA used a profile JAX handed over itself (fdo_profile: auto PGLE "
                    f"is on, and its profile wins over the flag), not {self.profile_given}: "
                    "not counted; turn JAX_ENABLE_PGLE off for a manual PGLE run."
                )
            else:
                out[path] = (
                    f"XLA read {path}, which is not the profile pgle handed over "
                    f"({self.profile_given}) nor inside it: not counted."
                )
        return out


def path_matcher(given: str, also: tuple[str, ...] = ()) -> Callable[[str], bool]:
    """A read matches the path handed over (as XLA logs it: exactly as given, relative paths
    relative to the workload's directory) or a file inside it (directory mode), as a string
    or as the same file on this machine (a symlink to it, another spelling of its path)."""
    roots = [os.path.normpath(p) for p in (given, *also) if p]

    def match(read: str) -> bool:
        norm = os.path.normpath(read)
        if any(norm == r or norm.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
            return True
        return any(same_file(norm, r) or same_file(os.path.dirname(norm), r) for r in roots)

    return match


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file or directory here, symlinks resolved (a profile handed
    over through a link is that profile); False where either does not exist."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False
