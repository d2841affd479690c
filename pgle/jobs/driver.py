"""The per-rank context every workflow runs in: one process, or one rank of a multi-process job.

pgle runs as the per-rank wrapper under the cluster's launcher (`srun`, `mpirun`,
a Kubernetes JobSet). A workflow asks its `JobRun` for:

- where this rank's run folder goes (`<job_dir>/rank-<r>/` in a multi-process
  job, unless `--run-dir`, which may hold placeholders);
- every output path with its placeholders (`%r %l %n %j`, `{rank}`, ...) filled
  in, and refused when the ranks would all write one file;
- the launch itself (`JobRun.execute`): the rank's start and exit are recorded
  in the job folder, and the launcher's watchdog stops this rank's workload as
  soon as a peer's workload fails, with that workload's exit code;
- the end (`JobRun.complete`): the rank's report lands in the job folder; rank
  0 gathers every rank's report (up to `--gather-timeout`), builds one job
  report (per module across ranks: a module applied on some ranks only is
  `partial`, with the ranks named; ranks that never reported are listed with
  what their files say) and writes it to `<job_dir>/job.json` as well; the
  other ranks print one line.

In a single process all of this falls away: no job folder, no gathering, the
workflow's report unchanged (placeholders still work: %r is 0).

Exit codes of a multi-process job, on rank 0 (README "Running on a cluster"):
a workload that failed on its own -> the code of the first rank that failed;
else a rank whose pgle failed -> that code; else ranks that never reported ->
1 (pgle could not gather the evidence); else what the workflow decides from
the job verdict (3 for --require-applied and the like). Every other rank exits
with its own code (its workload's, the failed peer's if it was stopped, or its
own verdict's).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from pgle.jobs import folder as job
from pgle.jobs import ranks
from pgle.atomic import write_text_atomic
from pgle.errors import EXIT_ERROR, EXIT_NOT_VERIFIED, BadInput, PgleError
from pgle.jobs.ranks import RankInfo
from pgle.report import Report
from pgle.verdicts.pgle_applied import module_label, overall_status

DEFAULT_GATHER_TIMEOUT_S = 600.0
JOB_REPORT = "job.json"
MAX_MISSING_NAMES = 50

Combine = Callable[["JobRun", Mapping[int, dict], Mapping[int, str]], Report]


# -- small helpers ---------------------------------------------------------------------------

def rank_ranges(numbers: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2, 5, 7-8'."""
    nums = sorted(set(numbers))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(parts)


def ranks_phrase(numbers: Iterable[int]) -> str:
    """'rank 3' or 'ranks 0-2, 5'."""
    nums = sorted(set(numbers))
    return f"rank{'' if len(nums) == 1 else 's'} {rank_ranges(nums)}"


def literal(path: os.PathLike | str) -> str:
    """`path` with %, { and } escaped, so that placeholder expansion gives it back unchanged."""
    return os.fspath(path).replace("%", "%%").replace("{", "{{").replace("}", "}}")


def quiet_stdout_for_json(json_out: bool, environ: Mapping[str, str] | None = None) -> bool:
    """True when this process is a non-leader rank and --json was asked: only rank 0 prints the
    (job) report on stdout, so the other ranks print no JSON and send the workload's stdout to
    stderr, keeping `srun ... --json > job.json` one JSON document."""
    if not json_out:
        return False
    try:
        info = ranks.detect(os.environ if environ is None else environ)
    except PgleError:
        return False  # the workflow reports it
    return info.is_multiprocess and not info.is_leader


def report_target(report_path: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """Where this rank writes `--report`: the path with its placeholders filled in. In a
    multi-process job a path without a rank placeholder is rank 0's alone (the job report)."""
    if not report_path:
        return report_path
    try:
        info = ranks.detect(os.environ if environ is None else environ)
        expanded = ranks.expand_path(report_path, info)
        per_rank = ranks.has_rank_placeholder(report_path)
    except PgleError:
        return report_path  # the workflow reports the bad placeholder or environment
    if info.is_multiprocess and not info.is_leader and not per_rank:
        return None
    return expanded


# -- the context -------------------------------------------------------------------------------

@dataclasses.dataclass
class JobRun:
    command: str
    info: RankInfo
    job_dir: Path | None  # None: one process
    gather_timeout_s: float = DEFAULT_GATHER_TIMEOUT_S
    run_root: Path | None = None  # this rank's default run folder (None: .pgle/runs/...)
    notices: list[str] = dataclasses.field(default_factory=list)
    started: bool = False
    exited: bool = False
    stopped_for: job.PeerFailure | None = None
    host: str = dataclasses.field(default_factory=socket.gethostname)

    @classmethod
    def start(cls, command: str, environ: Mapping[str, str] | None = None, *,
              job_dir: str | None = None,
              gather_timeout_s: float | None = DEFAULT_GATHER_TIMEOUT_S) -> "JobRun":
        """Detect the rank and name the job folder (BadInput on a malformed environment)."""
        info = ranks.detect(os.environ if environ is None else environ)
        timeout = DEFAULT_GATHER_TIMEOUT_S if gather_timeout_s is None else float(gather_timeout_s)
        if timeout < 0:
            raise BadInput(f"--gather-timeout {gather_timeout_s} is negative.")
        if job_dir is not None:
            ranks.validate_template(job_dir)
        jd = job.job_dir_for(info, explicit=job_dir) if info.is_multiprocess else None
        root = jd / f"rank-{info.rank}" if jd is not None else None
        return cls(command, info, jd, timeout, run_root=root)

    def phase(self, name: str, run_root: os.PathLike | str | None = None) -> "JobRun":
        """A sub-job (tune's collect and run phases): its own job folder `<job_dir>/<name>/`,
        the same rank, its run folder `run_root`."""
        return JobRun(f"{self.command}:{name}", self.info,
                      self.job_dir / name if self.job_dir is not None else None,
                      self.gather_timeout_s, Path(run_root) if run_root is not None else None,
                      host=self.host)

    # -- who we are --
    @property
    def multiprocess(self) -> bool:
        return self.job_dir is not None

    @property
    def leader(self) -> bool:
        return self.info.is_leader

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world_size(self) -> int:
        return self.info.world_size

    # -- paths --
    def path(self, template: str | None) -> str | None:
        """`template` with its placeholders filled in (BadInput on an unknown one)."""
        if template is None:
            return None
        return ranks.expand_path(os.fspath(template), self.info)

    def per_rank_path(self, template: str | None, option: str) -> str | None:
        """An output every rank writes: in a multi-process job it must hold %r or {rank}."""
        if template is None:
            return None
        expanded = self.path(template)
        if self.multiprocess and not ranks.has_rank_placeholder(os.fspath(template)):
            raise BadInput(
                f"{option} {template} has no rank placeholder: all {self.world_size} ranks "
                "would write the same path.",
                hint=f"Add %r (the rank), e.g. {_suggest(os.fspath(template))}.")
        return expanded

    def run_dir(self, given: str | None) -> str | None:
        """This rank's run folder: `--run-dir` (per rank), else `<job_dir>/rank-<r>/`, else
        the default `.pgle/runs/<stamp>-<command>-<pid>/`."""
        if given:
            return self.per_rank_path(given, "--run-dir")
        return str(self.run_root) if self.run_root is not None else None

    # -- messages --
    def notifier(self, notify: Callable[[str], None]) -> Callable[[str], None]:
        """Rank 0 (or a single process) says everything; other ranks keep their messages in
        their report and print only the final one-line summary."""
        if not self.multiprocess or self.leader:
            return notify

        def keep(message: str) -> None:
            self.notices.append(message)

        return keep

    # -- the launch --
    def execute(self, workload, run, child, **kwargs):
        """`pgle.launch.execution.execute`, with this rank's start and exit recorded and the watchdog
        that stops the workload when a peer's workload failed."""
        from pgle.launch.execution import execute

        if not self.multiprocess:
            return execute(workload, run, child, **kwargs)
        job.mark_started(self.job_dir, self.info)
        self.started = True
        ex = execute(workload, run, child, watchdog=self.watchdog(), **kwargs)
        self.mark_exit(ex.exit_code)
        return ex

    def watchdog(self) -> Callable[[], int | None]:
        check = job.watchdog(self.job_dir, self.rank)

        def poll() -> int | None:
            failure = check()
            if failure is None:
                return None
            self.stopped_for = failure
            return failure.exit_code

        return poll

    def mark_exit(self, code: int) -> None:
        if self.exited or not self.multiprocess:
            return
        self.exited = True
        job.mark_exit(self.job_dir, self.rank, code,
                      stopped_for=self.stopped_for.rank if self.stopped_for else None)

    # -- the end --
    def complete(self, produce: Callable[[], Report], combine: Combine | None = None) -> Report:
        """Run the rank's part; in a multi-process job record its report, and on rank 0 gather
        every rank's and return the job report (`combine` builds its verdict)."""
        if not self.multiprocess:
            return produce()
        try:
            report = produce()
        except PgleError as e:
            self._record_failure(e.exit_code, str(e))
            e.message = f"rank {self.rank}: {e.message}"
            raise
        except KeyboardInterrupt:
            self._record_failure(130, "interrupted")
            raise
        except BaseException as e:
            self._record_failure(EXIT_ERROR, f"{type(e).__name__}: {e}")
            raise
        self.annotate(report)
        self.mark_exit(report.workload_exit_code or 0)
        job.write_report(self.job_dir, self.rank, report)
        if not self.leader:
            return QuietReport.of(report, self.summary_line(report))
        try:
            return self.job_report(report, combine or combine_verdicts)
        except PgleError as e:
            # Ranks waiting on the job report (tune) learn at once that there will be none.
            self._write_job_error(e.exit_code, str(e))
            raise
        except BaseException as e:
            self._write_job_error(EXIT_ERROR, f"{type(e).__name__}: {e}")
            raise

    def _write_job_error(self, code: int, message: str) -> None:
        report = Report(self.command.split(":")[-1], "error", exit_code=code,
                        reasons=[f"rank 0 could not build the job report: {message}"])
        report.details["pgle_error"] = message
        try:
            write_text_atomic(self.job_dir / JOB_REPORT, report.to_json() + "\n")
        except OSError:
            pass

    def _record_failure(self, code: int, message: str) -> None:
        """A rank that fails in pgle itself still tells its peers (they stop their workloads
        instead of waiting in a collective) and leaves a report for rank 0."""
        try:
            self.mark_exit(code)
            report = Report(self.command.split(":")[-1], "error", exit_code=code,
                            reasons=[f"pgle failed on rank {self.rank}: {message}"])
            report.details["pgle_error"] = message
            self.annotate(report)
            job.write_report(self.job_dir, self.rank, report)
        except (OSError, PgleError):
            pass

    def annotate(self, report: Report) -> None:
        """What makes a rank's report self-describing in the job folder."""
        report.details["rank"] = {**self.info.to_dict(), "host": self.host}
        if self.notices:
            report.details["notices"] = list(self.notices)
        for m in report.modules:
            if m.get("rank") is None:
                m["rank"] = self.rank
        if self.stopped_for is not None:
            f = self.stopped_for
            report.details["stopped_for"] = {"rank": f.rank, "exit_code": f.exit_code}
            why = (f"pgle stopped this rank's workload: rank {f.rank}'s workload failed with "
                   f"code {f.exit_code}")
            if why not in report.reasons:
                report.reasons.append(why)

    def summary_line(self, report: Report) -> str:
        path = job.report_path(self.job_dir, self.rank)
        text = f"rank {self.rank} of {self.world_size}: {report.status}"
        counts = Counter(m.get("status") for m in report.modules)
        if counts:
            text += " (" + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")"
        if self.stopped_for is not None:
            text += (f"; stopped: rank {self.stopped_for.rank}'s workload failed with code "
                     f"{self.stopped_for.exit_code}")
        elif report.workload_exit_code not in (0, None):
            text += f"; workload exited with code {report.workload_exit_code}"
        return f"{text}; exit {report.exit_code}; report {path}"

    def job_report(self, own: Report, combine: Combine) -> Report:
        gathered = job.gather(self.job_dir, self.world_size, self.gather_timeout_s)
        reports = dict(gathered.reports)
        reports[self.rank] = json.loads(own.to_json())  # ours, as written
        missing = job.describe_missing(self.job_dir, gathered.missing)
        report = combine(self, reports, missing)
        self._job_details(report, reports, missing)
        self._job_exit_code(report, reports, missing)
        report.warnings = list(dict.fromkeys(report.warnings
                                             + _merge_warnings(reports, self.world_size)))
        write_text_atomic(self.job_dir / JOB_REPORT, report.to_json() + "\n")
        return report

    def _job_details(self, report: Report, reports: Mapping[int, dict],
                     missing: Mapping[int, str]) -> None:
        report.run_dir = str(self.job_dir)
        report.details["job"] = {
            "dir": str(self.job_dir), "id": self.info.job_key, "world_size": self.world_size,
            "source": self.info.source, "reported": sorted(reports),
            "missing": [{"rank": r, "why": why} for r, why in sorted(missing.items())],
            "gather_timeout_s": self.gather_timeout_s, "report": str(self.job_dir / JOB_REPORT),
        }
        rows = []
        for r, rep in sorted(reports.items()):
            rank_info = (rep.get("rank") if isinstance(rep.get("rank"), dict) else None) or {}
            rows.append({"rank": r, "status": rep.get("status"), "exit_code": rep.get("exit_code"),
                         "workload_exit_code": rep.get("workload_exit_code"),
                         "host": rank_info.get("host"), "run_dir": rep.get("run_dir"),
                         "log_path": rep.get("log_path"), "stopped_for": rep.get("stopped_for"),
                         "report": str(job.report_path(self.job_dir, r))})
        report.details["ranks"] = rows
        line = f"{len(reports)} of {self.world_size} ranks reported (job folder {self.job_dir})"
        report.summary.append(line)
        for r, why in sorted(missing.items()):
            report.summary.append(f"rank {r} never reported: {why}")

    def _job_exit_code(self, report: Report, reports: Mapping[int, dict],
                       missing: Mapping[int, str]) -> None:
        failure = job.peer_failure(self.job_dir, -1)
        if failure is not None:
            # The first rank whose workload (or pgle, before launching it) failed on its own.
            report.workload_exit_code = failure.exit_code
            report.exit_code = failure.exit_code
            stopped = sorted(r for r, rep in reports.items() if rep.get("stopped_for"))
            text = f"rank {failure.rank} failed first, with exit code {failure.exit_code}"
            if stopped:
                text += f"; pgle stopped the workload on {ranks_phrase(stopped)}"
            report.reasons.append(text + ".")
            report.summary.append(text)
            return
        errors = [(r, rep) for r, rep in sorted(reports.items())
                  if rep.get("pgle_error") and rep.get("exit_code")]
        if errors:
            r, rep = errors[0]
            report.exit_code = int(rep["exit_code"])
            text = f"pgle failed on {ranks_phrase(x for x, _ in errors)} (rank {r}: exit {rep['exit_code']})"
            report.reasons.append(text + ".")
            report.summary.append(text)
            return
        if missing:
            report.exit_code = EXIT_ERROR
            text = (f"{ranks_phrase(missing)} never reported within --gather-timeout "
                    f"{self.gather_timeout_s:g} s: the job verdict covers the other ranks only")
            report.reasons.append(text + ".")
            report.summary.append(text)

    # -- tune: the other ranks wait for what rank 0 made --
    def wait_for_job_report(self) -> dict:
        """The job report rank 0 wrote for this (phase) job, waiting up to the gather timeout;
        gives up early when rank 0 failed. PgleError if it never comes."""
        path = self.job_dir / JOB_REPORT
        deadline = time.monotonic() + self.gather_timeout_s
        interval = 0.05
        while True:
            try:
                with open(path, encoding="utf-8") as f:
                    return json.load(f)
            except (FileNotFoundError, ValueError):
                pass
            if job.failed_path(self.job_dir, 0).exists():
                try:
                    with open(job.report_path(self.job_dir, 0), encoding="utf-8") as f:
                        why = json.load(f).get("pgle_error")
                except (OSError, ValueError):
                    why = None
                if why:
                    raise PgleError(f"rank 0 failed, so there is no job report: {why}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise PgleError(f"rank 0 wrote no job report {path} within --gather-timeout "
                                f"{self.gather_timeout_s:g} s.")
            time.sleep(min(interval, left))
            interval = min(interval * 1.5, 0.5)


def _suggest(template: str) -> str:
    stem, dot, ext = template.rpartition(".")
    if dot and "/" not in ext and stem:
        return f"{stem}-%r.{ext}"
    return template.rstrip("/") + "-%r"


def _merge_warnings(reports: Mapping[int, dict], world_size: int) -> list[str]:
    """Each distinct warning once; prefixed with the ranks that gave it unless all did."""
    by_text: dict[str, list[int]] = {}
    for r, rep in sorted(reports.items()):
        for w in rep.get("warnings") or []:
            by_text.setdefault(w, []).append(r)
    out = []
    for text, rs in by_text.items():
        out.append(text if len(rs) == world_size else f"{ranks_phrase(rs)}: {text}")
    return out


# -- a non-leader's report -------------------------------------------------------------------

@dataclasses.dataclass
class QuietReport(Report):
    """What a rank other than 0 returns: the CLI prints its one line (summary) and no warnings;
    `--json`/`--report` still carry the rank's full report."""

    full: dict | None = None

    @classmethod
    def of(cls, report: Report, line: str) -> "QuietReport":
        return cls(report.command, report.status, exit_code=report.exit_code,
                   workload_exit_code=report.workload_exit_code, profile=report.profile,
                   log_path=report.log_path, trace_dir=report.trace_dir, run_dir=report.run_dir,
                   modules=report.modules, reasons=report.reasons, summary=[line],
                   full=json.loads(report.to_json()))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.full or {})


# -- per module across ranks --------------------------------------------------------------------

def aggregate_modules(by_rank: Mapping[int, Sequence[Mapping[str, Any]]], *, ok: str = "applied",
                      partial: str = "partial",
                      expected: Iterable[int] | None = None) -> list[dict]:
    """One row per module over the ranks. A module with one status on every expected rank keeps
    it; one that is `ok` (or `partial`) on some ranks only is `partial`, and so is one `ok`
    everywhere it was seen but absent on other ranks; anything else takes the status most
    ranks gave. Rows keep the fields of the worst rank's row (coverage: the lowest), plus
    `ranks` ({status: [ranks]}), `absent_ranks`, `ranks_summary` (a phrase naming them) and,
    where the ranks disagree, `per_rank` ([{rank, status, coverage, ...}]).

    Modules are matched by name and fingerprint; a name compiled several times on one rank
    matches its n-th compile on the other ranks.
    """
    expected_ranks = sorted(set(by_rank) if expected is None else set(expected))
    rows: dict[tuple, dict[int, Mapping[str, Any]]] = {}
    for rank in sorted(by_rank):
        seen: Counter = Counter()
        for m in by_rank[rank]:
            name = module_label(m)
            base = (name, m.get("fingerprint"))
            key = (*base, seen[base])
            seen[base] += 1
            rows.setdefault(key, {})[rank] = m
    out = []
    for per_rank in rows.values():
        out.append(_aggregate_row(per_rank, ok, partial, expected_ranks))
    return out


def _aggregate_row(per_rank: Mapping[int, Mapping[str, Any]], ok: str, partial: str,
                   expected: Sequence[int]) -> dict:
    by_status: dict[str, list[int]] = {}
    for r in sorted(per_rank):
        by_status.setdefault(per_rank[r].get("status"), []).append(r)
    absent = [r for r in expected if r not in per_rank]
    if len(by_status) == 1 and not absent:
        status = next(iter(by_status))
    elif ok in by_status or partial in by_status:
        status = partial
    else:
        status = max(by_status, key=lambda s: (len(by_status[s]), -by_status[s][0]))
    worst_rank = next((r for r in sorted(per_rank) if per_rank[r].get("status") != ok),
                      min(per_rank))
    row = {k: v for k, v in per_rank[worst_rank].items()}
    row["status"] = status
    row["rank"] = None
    coverages = [m.get("coverage") for m in per_rank.values() if m.get("coverage") is not None]
    if "coverage" in row:
        row["coverage"] = min(coverages) if coverages else None
    if "instructions_missing" in row:
        miss = [m.get("instructions_missing") for m in per_rank.values()
                if m.get("instructions_missing") is not None]
        row["instructions_missing"] = max(miss) if miss else None
    if "missing_instructions" in row:
        names: dict[str, None] = {}
        for r in sorted(per_rank):
            for n in per_rank[r].get("missing_instructions") or []:
                if len(names) < MAX_MISSING_NAMES:
                    names.setdefault(n, None)
        row["missing_instructions"] = list(names)
    if "notes" in row:
        notes: dict[str, None] = {}
        for r in sorted(per_rank):
            for n in per_rank[r].get("notes") or []:
                notes.setdefault(n, None)
        row["notes"] = list(notes)
    row["ranks"] = by_status
    row["absent_ranks"] = absent
    row["ranks_summary"] = _ranks_summary(per_rank, by_status, absent)
    # Each rank's own figures, only where the ranks disagree (512 ranks x 50 modules add up).
    row["per_rank"] = [
        {"rank": r, "status": m.get("status"),
         **{k: m[k] for k in ("coverage", "instructions_missing", "reason") if k in m}}
        for r, m in sorted(per_rank.items())] if len(by_status) > 1 or absent else []
    return row


def _ranks_summary(per_rank, by_status: Mapping[str, list[int]], absent: Sequence[int]) -> str:
    parts = []
    for status, rs in by_status.items():
        text = f"{status} on {ranks_phrase(rs)}"
        covs = [per_rank[r].get("coverage") for r in rs if per_rank[r].get("coverage") is not None]
        if covs and min(covs) < 1.0:
            low = min(covs)
            text += f" (coverage {low:.0%}" if len(set(covs)) == 1 else f" (coverage down to {low:.0%}"
            miss = [per_rank[r].get("instructions_missing") or 0 for r in rs]
            text += f", {max(miss)} missing)" if max(miss) else ")"
        parts.append(text)
    if absent:
        parts.append(f"no evidence for it on {ranks_phrase(absent)}")
    return "; ".join(parts)


def job_module_lines(modules: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for m in modules:
        name = module_label(m)
        by_status = m.get("ranks") or {}
        if len(by_status) == 1 and not m.get("absent_ranks"):
            lines.append(f"  {name}: {m.get('ranks_summary')}")
        else:
            lines.append(f"  {name}: {m['status']} ({m.get('ranks_summary')})")
    return lines


def _grouped(reports: Mapping[int, dict], field: str, world_size: int) -> list[str]:
    """Each distinct sentence of `field` across ranks, prefixed with its ranks unless all."""
    by_text: dict[str, list[int]] = {}
    for r, rep in sorted(reports.items()):
        for text in rep.get(field) or []:
            by_text.setdefault(text, []).append(r)
    return [t if len(rs) == world_size else f"{ranks_phrase(rs)}: {t}" for t, rs in by_text.items()]


# -- the job verdict of run / verify ---------------------------------------------------------------

def judge_job(by_rank: Mapping[int, Sequence[Mapping[str, Any]]],
              rank_status: Mapping[int, str | None],
              rank_reasons: Mapping[int, Sequence[str]]) -> tuple[str, list[dict], list[str]]:
    """(status, modules, reasons) of a job from each rank's verdict modules and status (README
    "Verdicts", over ranks). Ranks are those in `rank_status`."""
    expected = [r for r, s in rank_status.items() if s != "not_applicable"]
    modules = aggregate_modules(by_rank, ok="applied", expected=expected)
    world = len(rank_status)
    reasons: list[str] = []
    errors = sorted(r for r, s in rank_status.items() if s == "error")
    if errors:
        status = "error"
        reasons += _grouped({r: {"reasons": rank_reasons.get(r, [])} for r in errors}, "reasons",
                            world)
    elif not modules:
        statuses = set(rank_status.values())
        status = "not_applicable" if statuses == {"not_applicable"} else "not_applied"
        reasons += _grouped({r: {"reasons": rs} for r, rs in rank_reasons.items()}, "reasons", world)
    else:
        counts = Counter(m["status"] for m in modules)
        status = overall_status(m["status"] for m in modules)
        mixed = [m for m in modules if len(m["ranks"]) > 1 or m["absent_ranks"]]
        text = (f"{counts['applied']} of {len(modules)} module(s) applied the profile on every "
                f"rank that reported ({ranks_phrase(rank_status)})")
        if counts["partial"]:
            text += f", {counts['partial']} partially"
            if mixed:
                text += f" ({len(mixed)} on some ranks only)"
        if counts["not_applied"]:
            text += f", {counts['not_applied']} not at all"
        reasons.append(text + ".")
        for m in mixed:
            name = module_label(m)
            reasons.append(f"{name}: {m['ranks_summary']}.")
    return status, modules, reasons


def combine_verdicts(jr: JobRun, reports: Mapping[int, dict], missing: Mapping[int, str],
                     *, require_applied: bool = False) -> Report:
    """The job report of `pgle run`: the verdict per module across the ranks that reported."""
    by_rank = {r: rep.get("modules") or [] for r, rep in reports.items()}
    status, modules, reasons = judge_job(
        by_rank, {r: rep.get("status") for r, rep in reports.items()},
        {r: rep.get("reasons") or [] for r, rep in reports.items()})
    own = reports.get(jr.rank) or {}
    report = Report(own.get("command") or jr.command, status, modules=modules, reasons=reasons,
                    profile=own.get("profile"), log_path=own.get("log_path"),
                    workload_exit_code=own.get("workload_exit_code"))
    report.details["step_times"] = {r: rep.get("step_times") for r, rep in sorted(reports.items())}
    report.details["backend"] = own.get("backend")
    report.summary.append(f"job verdict: {status}: " + " ".join(reasons[:1]))
    report.summary += job_module_lines(modules)
    report.exit_code = EXIT_NOT_VERIFIED if require_applied and status != "applied" else 0
    if report.exit_code == EXIT_NOT_VERIFIED:
        report.summary.append(f"--require-applied: the job's status is {status}, not applied")
    return report


# -- the job verdict of auto / prewarm / nsys -------------------------------------------------------

def combine_modules(jr: JobRun, reports: Mapping[int, dict], missing: Mapping[int, str], *,
                    ok: str, overall: Callable[[list[dict]], str], headline: str, what: str,
                    required: Callable[[list[dict]], list[str]] = lambda modules: [],
                    keep: Sequence[str] = ()) -> Report:
    """The job report of a workflow whose modules have one `ok` status (auto: optimized, prewarm:
    optimized, nsys: loaded_optimized): per module across the ranks; `overall` (the workflow's
    own rule) on the aggregated modules, and `partial` when a module is `ok` on some ranks
    only. `required(modules)`: sentences for --require/--require-all failures (exit
    3). `keep`: details of rank 0's report copied into the job report."""
    by_rank = {r: rep.get("modules") or [] for r, rep in reports.items()}
    modules = aggregate_modules(by_rank, ok=ok, expected=sorted(reports))
    status = overall(modules)
    if any(m["status"] == "partial" for m in modules):
        status = "partial"  # a module `ok` on some ranks only: the ranks run different programs
    own = reports.get(jr.rank) or {}
    report = Report(own.get("command") or jr.command, status, modules=modules,
                    log_path=own.get("log_path"), workload_exit_code=own.get("workload_exit_code"))
    for key in ("backend", *keep):
        if key in own:
            report.details[key] = own[key]
    mixed = [m for m in modules if len(m["ranks"]) > 1 or m["absent_ranks"]]
    n_ok = sum(1 for m in modules if m["status"] == ok)
    head = f"{n_ok} of {len(modules)} modules {what} on every rank that reported " \
           f"({ranks_phrase(reports)})"
    if mixed:
        head += f"; {len(mixed)} on some ranks only"
    report.reasons.append(head + ".")
    for m in mixed:
        report.reasons.append(f"{m.get('module')}: {m['ranks_summary']}.")
    report.reasons += _grouped({r: rep for r, rep in reports.items()}, "reasons", len(reports))
    report.summary.append(f"{headline}: {status}: {head}")
    for m in modules:
        line = job_module_lines([m])[0]
        if m.get("reason") and len(m["ranks"]) == 1 and not m["absent_ranks"]:
            line += f" ({m['reason']})"
        if m.get("fix") and m["status"] != ok:
            line += f"; fix: {m['fix']}"
        report.summary.append(line)
    failures = required(modules)
    if failures:
        report.exit_code = EXIT_NOT_VERIFIED
        report.reasons += failures
        report.summary.append("not verified: " + "; ".join(failures))
    return report
