"""The job driver: runs one workflow in this process, alone or as one rank of a job.

pgle runs as the per-rank wrapper under the cluster's launcher (`srun`, `mpirun`, a
Kubernetes JobSet). A workflow is three plain functions (`Workflow`): what paths it needs,
its per-rank body, and, on rank 0, how the ranks' reports combine into the job report. The
driver calls them, always downward:

1. `layout.resolve` fills in every rank-dependent path once (pgle.jobs.layout);
2. the body runs with that layout and a `launch` function: `pgle.launch.execution.execute`
   with start/exit hooks that record this rank's start and exit in the job folder, and the
   watchdog that stops this rank's workload as soon as a peer's workload failed;
3. the rank's report lands in the job folder; rank 0 gathers every rank's report (up to
   `--gather-timeout`), calls the workflow's combine step (pgle.verdicts.across_ranks for the
   verdicts), names the ranks that never reported and writes `<job_dir>/job.json`; the other
   ranks print one line.

In one process none of this happens: the body runs with the plain layout and the plain
launch, and its report is the result.

Exit codes of a multi-process job, on rank 0 (README "Running on a cluster"): a workload
that failed on its own -> the code of the first rank that failed; else a rank whose pgle
failed -> that code; else ranks that never reported -> 1 (pgle could not gather the
evidence); else what the workflow decides from the job verdict (3 for --require-applied and
the like). Every other rank exits with its own code (its workload's, the failed peer's if it
was stopped, or its own verdict's).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pgle.atomic import write_text_atomic
from pgle.errors import EXIT_ERROR, PgleError, Stalled
from pgle.jobs import first_stopped, fleet, folder, kv, layout, rank_data, ranks
from pgle.jobs.layout import JobOptions, LayoutRequest, RankLayout
from pgle.jobs.ranks import RankInfo
from pgle.launch import execution
from pgle.launch.childenv import ChildEnv
from pgle.launch.runfolder import RunFolder
from pgle.launch.stall import StallPolicy, StallReport
from pgle.launch.workload import Workload
from pgle.phrases import ranks_phrase
from pgle.report import Report
from pgle.verdicts.across_ranks import JobReports, grouped

JOB_REPORT = "job.json"


@dataclasses.dataclass(frozen=True)
class Workflow:
    """A workflow as the driver sees it.

    request(opts) -> LayoutRequest: the paths to resolve for this process.
    body(opts, layout, launch, environ) -> Report: this process's part (its progress and
        notices go to the `pgle` logger).
    combine(opts, layout, job_reports) -> Report: rank 0's job report (None: a workflow of phases,
        whose body runs sub-workflows through the `phase` function it is given instead of
        `launch`).
    """

    command: str
    request: Callable[[Any], LayoutRequest]
    body: Callable[..., Report]
    combine: Callable[[Any, RankLayout, JobReports], Report] | None


@dataclasses.dataclass
class PhaseResult:
    own: Report  # this process's report (another rank's: its one line)
    job: dict[str, Any]  # the phase's job report, the same on every rank (one process: `own`)


def run(
    wf: Workflow, opts: Any, job_opts: JobOptions | None = None, *, environ: Mapping[str, str]
) -> Report:
    """Run `wf` in this process: alone, or as one rank of the job the environment describes."""
    job_opts = job_opts or JobOptions()
    environ = dict(environ)
    info = ranks.detect(environ)
    if not info.is_multiprocess:
        return _alone(wf, opts, info, environ, job_opts)
    rank = RankRun(
        wf.command,
        info,
        folder.job_dir_for(info, explicit=job_opts.job_dir),
        job_opts.gather_timeout_s,
        stall_timeout_s=job_opts.stall_timeout_s,
        gather=job_opts.gather,
        require_same_program=job_opts.require_same_program,
    )
    return rank.run(wf, opts, environ)


class _Lines(logging.Handler):
    def __init__(self, sink: Callable[[str], None]) -> None:
        super().__init__()
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        prefix = "warning: " if record.levelno >= logging.WARNING else ""
        self.sink(prefix + record.getMessage())


@contextlib.contextmanager
def log_lines(sink: Callable[[str], None], *, alone: bool = False) -> Iterator[None]:
    """pgle's log records (INFO and up) also go to `sink`, as the lines the CLI prints;
    `alone`: only there, not to the terminal (on a rank other than 0 they go into the rank's
    report, `details.notices`: only rank 0 talks, the others print one line)."""
    logger = logging.getLogger("pgle")
    handlers, propagate, level = logger.handlers[:], logger.propagate, logger.level
    handler = _Lines(sink)
    if alone:
        logger.handlers[:] = [handler]
        logger.propagate = False
    else:
        logger.addHandler(handler)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        if alone:
            logger.handlers[:] = handlers
            logger.propagate = propagate
        else:
            logger.removeHandler(handler)
        logger.setLevel(level)


def _alone(
    wf: Workflow,
    opts: Any,
    info: RankInfo,
    environ: dict[str, str],
    job_opts: JobOptions,
    run_root: str | None = None,
) -> Report:
    request = wf.request(opts)
    if run_root is not None:
        request = dataclasses.replace(request, run_root=run_root)
    lay = layout.resolve(request, info, None)
    if wf.combine is None:

        def phase(name: str, sub: Workflow, sub_opts: Any, run_root: str) -> PhaseResult:
            own = _alone(sub, sub_opts, info, environ, job_opts, run_root)
            return PhaseResult(own, own.to_dict())

        return wf.body(opts, lay, phase, environ)
    launch = functools.partial(execution.execute, stall_timeout=job_opts.stall_timeout_s)
    return wf.body(opts, lay, launch, environ)


# -- one rank of a job --------------------------------------------------------------------------


@dataclasses.dataclass
class RankRun:
    command: str
    info: RankInfo
    job_dir: Path
    gather_timeout_s: float = layout.DEFAULT_GATHER_TIMEOUT_S
    notices: list[str] = dataclasses.field(default_factory=list)
    exited: bool = False
    stopped_for: folder.PeerFailure | None = None
    host: str = dataclasses.field(default_factory=socket.gethostname)
    last_phase: Report | None = None
    stall_timeout_s: float | StallPolicy | None = None  # pgle.launch.stall (0: off)
    gather: str = "folder"  # folder | kv (pgle.jobs.kv)
    held: execution.Execution | None = None  # --gather kv: the workload waits for the exchange
    exchange: kv.HeldExchange | None = None  # ... and the exchange with it
    kv_errors: list[str] = dataclasses.field(default_factory=list)
    own_profile: str | None = None  # rank 0: the job's profile it wrote itself (--gather kv)
    require_same_program: bool = False  # issue 36: ranks that compile different programs stop
    forensics: fleet.Fleet | None = None  # issue 36: divergence, the first rank stopped

    def __post_init__(self) -> None:
        if self.forensics is None:
            self.forensics = fleet.Fleet(
                self.job_dir,
                self.rank,
                self.world_size,
                require_same_program=self.require_same_program,
            )

    claimed: bool = False  # this process holds the rank's start record (folder.claim_rank)

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world_size(self) -> int:
        return self.info.world_size

    def run(
        self, wf: Workflow, opts: Any, environ: dict[str, str], run_root: str | None = None
    ) -> Report:
        """Resolve the layout, run the body with the hooks, record the report; on rank 0 gather
        and combine. On another rank pgle's log records become the report's notices."""
        with (
            contextlib.nullcontext()
            if self.info.is_leader
            else log_lines(self.notices.append, alone=True)
        ):
            return self._run(wf, opts, environ, run_root)

    def _run(
        self, wf: Workflow, opts: Any, environ: dict[str, str], run_root: str | None
    ) -> Report:
        resolved: list[RankLayout] = []

        def produce() -> Report:
            request = wf.request(opts)
            if run_root is not None:
                request = dataclasses.replace(request, run_root=run_root)
            lay = layout.resolve(request, self.info, self.job_dir)
            resolved.append(lay)
            if wf.combine is not None:
                # Before the rank's run folder: two processes given one rank meet here.
                folder.claim_rank(self.job_dir, self.info)
                self.claimed = True
            if wf.combine is None:
                return wf.body(opts, lay, functools.partial(self.phase, environ), environ)
            return wf.body(opts, lay, self.launch, environ)

        if wf.combine is None:
            # Each phase records its own start, exit, report and failure in its own folder.
            return self._finish_phases(produce())
        try:
            report = self._guarded(produce)
            self.annotate(report)
            self.mark_exit(report.workload_exit_code or 0)
            folder.write_report(self.job_dir, self.rank, report)
            if self.gather == "kv":
                self._kv_send(resolved[0] if resolved else None)
            if not self.info.is_leader:
                return QuietReport.of(report, self.summary_line(report))
            if self.held is not None and self.held.interrupted:
                # Ctrl-C while held (--gather kv): the workload got it too and ends, so no more
                # files can travel; gathering would only sit out --gather-timeout (issue 37).
                self._release()  # raises Interrupted (exit 128+N)
            try:
                job_report = self.job_report(
                    report, functools.partial(wf.combine, opts, resolved[0])
                )
                self.own_profile = _written_here(resolved[0], job_report)
            except PgleError as e:
                # Ranks waiting on the job report (tune) learn at once that there will be none.
                self._write_job_error(e.exit_code, str(e))
                raise
            except BaseException as e:
                self._write_job_error(EXIT_ERROR, f"{type(e).__name__}: {e}")
                raise
            return job_report
        finally:
            if self.gather == "kv":
                self._kv_publish_job()
            self._release()

    def _guarded(self, produce: Callable[[], Report]) -> Report:
        try:
            return produce()
        except folder.RankTaken as e:
            # Another process holds this rank: its files are not this process's to write.
            e.message = f"rank {self.rank}: {e.message}"
            raise
        except PgleError as e:
            self._record_failure(e.exit_code, str(e))
            if isinstance(e, Stalled) and self.info.is_leader and self.forensics is not None:
                # issue 36: the job's first stopped rank, in rank 0's error report
                summary = self.forensics.stall_summary()
                e.fleet = {"stall": summary}
                if summary is not None:
                    e.message = f"{e.message}; {first_stopped.line(summary)}"
                found = self.forensics.compare()
                if found:
                    e.fleet["divergence"] = [d.to_dict() for d in found]
            e.message = f"rank {self.rank}: {e.message}"
            raise
        except KeyboardInterrupt:
            self._record_failure(130, "interrupted")
            raise
        except BaseException as e:
            self._record_failure(EXIT_ERROR, f"{type(e).__name__}: {e}")
            raise

    # -- the launch hooks --
    def launch(
        self, workload: Workload, run: RunFolder, child: ChildEnv, **kwargs: Any
    ) -> execution.Execution:
        self._release()  # a body that launches again: the earlier workload ends first
        forensics = self.forensics
        if forensics is not None:
            forensics.attach(run.path)
        ex = execution.execute(
            workload,
            run,
            child,
            on_start=self.mark_started,
            on_exit=self.mark_exit,
            watchdog=self.watchdog(),
            stall_timeout=self.stall_timeout_s,
            hold=self.gather == "kv",
            hold_timeout_s=self.gather_timeout_s + 300.0,
            before_stall_stop=None if forensics is None else self._stalled,
            **kwargs,
        )
        if forensics is not None:
            # The workload's last events (its harness writes them out at exit): the modules it
            # compiled and its steps reach the job folder before this rank reports.
            forensics.flush()
        if forensics is not None and self.stopped_for is not None:
            found = fleet.dumped_phase(run.path)
            forensics.publish_stall(
                found.name if found else None, found.text if found else None, own=False
            )
        if ex.held:
            self.held = ex
        return ex

    def _stalled(self, report: StallReport) -> None:
        """This rank's workload made no progress past its bound; its stacks are written and pgle
        is about to stop it (pgle.launch.stall): publish its phase for the first stopped rank
        (issue 36), then give the peers waiting for it the time to write theirs while it still
        runs (fleet.PEER_PHASE_WAIT_S)."""
        forensics = self.forensics
        if forensics is None:
            return
        pid = min(report.phase_names, default=None)  # the main process: the first started
        if pid is None:
            forensics.publish_stall(None, None, own=True)
        else:
            forensics.publish_stall(report.phase_names[pid], report.phases.get(pid), own=True)
        forensics.wait_for_phases(fleet.PEER_PHASE_WAIT_S)

    # -- --gather kv: the job's files through jax.distributed's key-value store --
    def _key(self, what: str) -> str:
        return f"pgle/{self.command}/{what}"

    def _kv_send(self, lay: RankLayout | None) -> None:
        """Rank r sends its files and takes the job's; rank 0 takes every rank's files."""
        ex = self.held
        if ex is None:
            self.kv_errors.append(
                f"--gather kv: rank {self.rank}'s workload did not wait at its end with a "
                "jax.distributed client (it failed first, or never called "
                "jax.distributed.initialize()), so its files could not travel"
            )
            return
        exchange = self.exchange = kv.HeldExchange(ex)
        if self.info.is_leader:
            keys = {self._key(f"rank-{r}"): r for r in range(1, self.world_size)}
            fetched, errors = exchange.round(
                {}, list(keys), final=False, timeout_s=self.gather_timeout_s
            )
            for key, raw in fetched.items():
                try:
                    kv.write_rank_files(self.job_dir, keys[key], raw)
                except (ValueError, OSError) as e:
                    why = e.strerror if isinstance(e, OSError) and e.strerror else e
                    errors.append(f"rank {keys[key]}: unreadable bundle ({why})")
            self.kv_errors += errors
            return
        mine = kv.rank_files_with_modes(self.job_dir, self.rank)
        own = kv.bundle(
            self.job_dir,
            {k: data for k, (data, _) in mine.items()},
            modes={k: mode for k, (_, mode) in mine.items()},
        )
        fetched, errors = exchange.round(
            {self._key(f"rank-{self.rank}"): own},
            [self._key("job")],
            final=True,
            timeout_s=self.gather_timeout_s,
        )
        self.kv_errors += errors
        job_bundle = fetched.get(self._key("job"))
        if job_bundle is not None:
            plan = lay.output if lay is not None else None
            try:
                kv.write_job_files(self.job_dir, job_bundle, plan.merged_output if plan else None)
            except (ValueError, OSError) as e:
                why = e.strerror if isinstance(e, OSError) and e.strerror else e
                self.kv_errors.append(f"rank 0's job files: unreadable bundle ({why})")

    def _kv_publish_job(self) -> None:
        """Rank 0: the job report (and the job's profile) to every rank; also when it failed,
        so that no rank waits for it in vain."""
        exchange = self.exchange
        if not self.info.is_leader or exchange is None or exchange.done:
            return
        try:
            # The profile rank 0 wrote itself, never one a rank's report names (issue 31).
            files, extra, modes = kv.job_files(self.job_dir, self.own_profile)
            payload = {self._key("job"): kv.bundle(self.job_dir, files, extra, modes)}
        except (OSError, ValueError, PgleError):
            payload = {}
        _, errors = exchange.round(payload, [], final=True, timeout_s=30.0)
        self.kv_errors += errors

    def _release(self) -> None:
        """A held workload goes on to its end."""
        ex, self.held = self.held, None
        if ex is None:
            return
        exchange = self.exchange
        if exchange is None or exchange.execution is not ex:
            exchange = kv.HeldExchange(ex)
        exchange.release()
        self.exchange = None
        ex.resume()

    def mark_started(self) -> None:
        folder.mark_started(self.job_dir, self.info, claimed=self.claimed)
        self.claimed = True

    def watchdog(self) -> Callable[[], int | None]:
        check = folder.watchdog(self.job_dir, self.rank)
        forensics = self.forensics

        def poll() -> int | None:
            failure = check()
            if failure is None:
                # issue 36: publish this rank's modules and steps; --require-same-program
                return forensics.poll() if forensics is not None else None
            self.stopped_for = failure
            return failure.exit_code

        return poll

    def mark_exit(self, code: int) -> None:
        if self.exited:
            return
        self.exited = True
        stopped_for = self.stopped_for.rank if self.stopped_for else None
        if (
            stopped_for is None
            and self.forensics is not None
            and self.forensics.stopped_for_divergence
        ):
            # issue 36: every rank stops on its own for the divergence; none failed first
            stopped_for = self.rank
        folder.mark_exit(self.job_dir, self.rank, code, stopped_for=stopped_for)

    # -- phases (tune): each a job of its own in <job_dir>/<name>/ --
    def phase(
        self, environ: dict[str, str], name: str, sub: Workflow, sub_opts: Any, run_root: str
    ) -> PhaseResult:
        phase = RankRun(
            f"{self.command}:{name}",
            self.info,
            self.job_dir / name,
            self.gather_timeout_s,
            host=self.host,
            stall_timeout_s=self.stall_timeout_s,
            gather=self.gather,
            require_same_program=self.require_same_program,
        )
        own = phase.run(sub, sub_opts, environ, run_root=run_root)
        self.last_phase = own
        return PhaseResult(
            own, own.to_dict() if self.info.is_leader else phase.wait_for_job_report()
        )

    def _finish_phases(self, report: Report) -> Report:
        """Rank 0 returns the workflow's report with the job's folders; another rank prints one
        line: its own last phase's."""
        if self.info.is_leader:
            report.details["job"] = {
                "dir": str(self.job_dir),
                "world_size": self.world_size,
                "phases": {p: str(self.job_dir / p) for p in report.details.get("phases", {})},
            }
            if report.details.get("step_times") is not None:
                report.summary.append(
                    f"step times are rank 0's; every rank's are in {self.job_dir}/run/"
                )
            return report
        phase = self.last_phase
        if phase is None:
            return report
        line = phase.summary[0] if phase.summary else f"rank {self.rank}: {phase.status}"
        code = report.exit_code if report.status == "error" else phase.exit_code
        quiet = QuietReport.of(phase, f"{report.command}: {line}")
        quiet.exit_code = code
        quiet.full = {**(quiet.full or {}), "command": report.command, "exit_code": code}
        return quiet

    # -- the end --
    def _error_report(self, code: int, what: str, message: str) -> Report:
        reason = f"{what}: {message}"
        report = Report(self.command.split(":")[-1], "error", exit_code=code, reasons=[reason])
        report.details["pgle_error"] = message
        return report

    def _write_job_error(self, code: int, message: str) -> None:
        report = self._error_report(code, "rank 0 could not build the job report", message)
        with contextlib.suppress(OSError):
            write_text_atomic(self.job_dir / JOB_REPORT, report.to_json() + "\n")

    def _record_failure(self, code: int, message: str) -> None:
        """A rank that fails in pgle itself still tells its peers (they stop their workloads
        instead of waiting in a collective) and leaves a report for rank 0."""
        try:
            self.mark_exit(code)
            report = self._error_report(code, f"pgle failed on rank {self.rank}", message)
            self.annotate(report)
            folder.write_report(self.job_dir, self.rank, report)
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
            why = (
                f"pgle stopped this rank's workload: rank {f.rank}'s workload failed with "
                f"code {f.exit_code}"
            )
            if why not in report.reasons:
                report.reasons.append(why)

    def summary_line(self, report: Report) -> str:
        path = folder.report_path(self.job_dir, self.rank)
        text = f"rank {self.rank} of {self.world_size}: {report.status}"
        counts = Counter(m.get("status") for m in report.modules)
        if counts:
            text += " (" + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")"
        if self.stopped_for is not None:
            text += (
                f"; stopped: rank {self.stopped_for.rank}'s workload failed with code "
                f"{self.stopped_for.exit_code}"
            )
        elif report.workload_exit_code not in (0, None):
            text += f"; workload exited with code {report.workload_exit_code}"
        return f"{text}; exit {report.exit_code}; report {path}"

    def job_report(self, own: Report, combine: Callable[[JobReports], Report]) -> Report:
        gathered = folder.gather(
            self.job_dir,
            self.world_size,
            # --gather kv: the ranks' files came in the exchange, which waited up to the
            # timeout; this rank's folder is its own, so nothing more arrives (issue 37).
            0.0 if self.gather == "kv" else self.gather_timeout_s,
        )
        reports = dict(gathered.reports)
        reports[self.rank] = json.loads(own.to_json())  # ours, as written
        missing = folder.describe_missing(self.job_dir, gathered.missing)
        if self.gather == "kv":
            missing = {
                r: f"{why} (--gather kv: its files never came through jax.distributed's "
                "key-value store)"
                for r, why in missing.items()
            }
        report = combine(JobReports(self.command.split(":")[-1], self.world_size, reports, missing))
        self._job_details(report, reports, missing)
        self._job_exit_code(report, reports, missing)
        if self.forensics is not None:  # issue 36: `divergence`, and `stall` after a stall
            stalled = any(
                rep.get("exit_code") == Stalled.exit_code
                or rep.get("workload_exit_code") == Stalled.exit_code
                for rep in reports.values()
            )
            self.forensics.annotate(report, stalled=stalled)
        report.warnings = list(
            dict.fromkeys(
                report.warnings + grouped(reports, "warnings", self.world_size) + self.kv_errors
            )
        )
        write_text_atomic(self.job_dir / JOB_REPORT, report.to_json() + "\n")
        return report

    def _job_details(
        self, report: Report, reports: Mapping[int, dict[str, Any]], missing: Mapping[int, str]
    ) -> None:
        report.run_dir = str(self.job_dir)
        report.details["job"] = {
            "dir": str(self.job_dir),
            "id": self.info.job_key,
            "world_size": self.world_size,
            "source": self.info.source,
            "reported": sorted(reports),
            "missing": [{"rank": r, "why": why} for r, why in sorted(missing.items())],
            "gather_timeout_s": self.gather_timeout_s,
            "report": str(self.job_dir / JOB_REPORT),
        }
        rows = []
        for r, rep in sorted(reports.items()):
            rank_info = (rep.get("rank") if isinstance(rep.get("rank"), dict) else None) or {}
            rows.append(
                {
                    "rank": r,
                    "status": rep.get("status"),
                    "exit_code": rep.get("exit_code"),
                    "workload_exit_code": rep.get("workload_exit_code"),
                    "host": rank_info.get("host"),
                    "run_dir": rep.get("run_dir"),
                    "log_path": rep.get("log_path"),
                    "stopped_for": rep.get("stopped_for"),
                    "report": str(folder.report_path(self.job_dir, r)),
                }
            )
        report.details["ranks"] = rows
        line = f"{len(reports)} of {self.world_size} ranks reported (job folder {self.job_dir})"
        report.summary.append(line)
        for r, why in sorted(missing.items()):
            report.summary.append(f"rank {r} never reported: {why}")

    def _job_exit_code(
        self, report: Report, reports: Mapping[int, dict[str, Any]], missing: Mapping[int, str]
    ) -> None:
        failure = folder.peer_failure(self.job_dir, -1)
        errors = [
            (r, rep)
            for r, rep in sorted(reports.items())
            if rep.get("pgle_error") and rep.get("exit_code")
        ]
        if failure is not None:
            # The first rank whose workload (or pgle, before launching it) failed on its own.
            report.workload_exit_code = failure.exit_code
            report.exit_code = failure.exit_code
            stopped = sorted(r for r, rep in reports.items() if rep.get("stopped_for"))
            text = f"rank {failure.rank} failed first, with exit code {failure.exit_code}"
            if stopped:
                text += f"; pgle stopped the workload on {ranks_phrase(stopped)}"
        elif errors:
            r, rep = errors[0]
            report.exit_code = int(rep["exit_code"])
            failed = ranks_phrase(x for x, _ in errors)
            text = f"pgle failed on {failed} (rank {r}: exit {rep['exit_code']})"
        elif missing:
            report.exit_code = EXIT_ERROR
            text = (
                f"{ranks_phrase(missing)} never reported within --gather-timeout "
                f"{self.gather_timeout_s:g} s: the job verdict covers the other ranks only"
            )
        else:
            return
        report.reasons.append(text + ".")
        report.summary.append(text)

    def wait_for_job_report(self) -> dict[str, Any]:
        """The job report rank 0 wrote for this (phase) job, waiting up to the gather timeout;
        gives up early when rank 0 failed. PgleError if it never comes."""
        path = self.job_dir / JOB_REPORT
        deadline = time.monotonic() + self.gather_timeout_s
        interval = 0.05
        while True:
            try:
                # rank 0's: another process's, read as foreign data (pgle.jobs.rank_data)
                data = rank_data.loads(
                    rank_data.read_under(self.job_dir, JOB_REPORT, rank_data.MAX_REPORT_BYTES),
                    f"job report {path}",
                )
                if isinstance(data, dict):
                    return data
                raise PgleError(f"job report {path} is not a JSON object.")
            except FileNotFoundError:
                pass
            except ValueError as e:  # written atomically: never half a file
                raise PgleError(f"{e}.") from None
            except OSError as e:
                raise PgleError(f"job report {path}: {e.strerror or e}.") from None
            if folder.failed_path(self.job_dir, 0).exists():
                try:
                    why = folder._read_json(folder.report_path(self.job_dir, 0)).get("pgle_error")
                except (OSError, ValueError):
                    why = None
                if why:
                    raise PgleError(f"rank 0 failed, so there is no job report: {why}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise PgleError(
                    f"rank 0 wrote no job report {path} within --gather-timeout "
                    f"{self.gather_timeout_s:g} s."
                )
            time.sleep(min(interval, left))
            interval = min(interval * 1.5, 0.5)


def _written_here(lay: RankLayout, report: Report) -> str | None:
    """The profile rank 0 itself wrote for the job (a merge, or its own with --rank 0), if the
    job report has one: what `--gather kv` sends every rank."""
    plan = lay.output
    if plan is None or not isinstance(report.profile, dict) or not report.profile.get("path"):
        return None
    if plan.merges_here and plan.merged_output:
        return os.path.abspath(plan.merged_output)
    if plan.mode == "one_rank" and plan.profiled and plan.rank_output:
        return os.path.abspath(plan.rank_output)
    return None


# -- a non-leader's report -------------------------------------------------------------------


@dataclasses.dataclass
class QuietReport(Report):
    """What a rank other than 0 returns: the CLI prints its one line (summary) and no warnings;
    `--json`/`--report` still carry the rank's full report."""

    full: dict[str, Any] | None = None

    @classmethod
    def of(cls, report: Report, line: str) -> QuietReport:
        kept = {f.name: getattr(report, f.name) for f in dataclasses.fields(Report)}
        # Its warnings and details only in `full`: the CLI prints the one line.
        kept.update(warnings=[], details={}, summary=[line])
        return cls(**kept, full=json.loads(report.to_json()))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.full or {})
