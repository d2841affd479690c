"""Independent mutants (issue 37): realistic one-line bugs written from the product code alone,
without reading the project's own mutant list (tests/mutants/mutants.py) or mutmut's survivors,
and the tests of each bug's area run against each.

    python3 tests/mutants/independent.py              # every mutant (about 20 min on 2 cores)
    python3 tests/mutants/independent.py --package store --package cache
    python3 tests/mutants/independent.py --only S3
    python3 tests/mutants/independent.py --baseline   # each area unmutated: passes, and how long
    python3 tests/mutants/independent.py --list
    python3 tests/mutants/independent.py --set regression   # the project's own list, the same way
    python3 tests/mutants/independent.py --set heldout      # bugs written blind to both lists
    python3 tests/mutants/independent.py --set heldout2     # a second list, blind to all three
    python3 tests/mutants/independent.py --set heldout3     # a third list, blind to all four
    python3 tests/mutants/independent.py --set heldout4     # a fourth list, blind to all five
    python3 tests/mutants/independent.py --set heldout5     # a fifth, on pgle/launch/harness.py
    python3 tests/mutants/independent.py --set heldout6     # a sixth, blind to all the others

The working tree is never touched: the tracked and untracked (not ignored) files are copied to a
temporary folder once, each mutant is written into that copy and undone there after its run, and
pytest runs there (PYTHONPATH at the copy; no bytecode is written or read, so a mutant of the
same size within the same second never runs stale code). A mutant is killed when its area's
tests fail (or pass the time limit: a hang the mutant caused), survived when they pass.
Results: tests/mutants/independent-results.json (`--write`). The same runner runs the project's
own regression list (tests/mutants/mutants.py, `--set regression`: bugs once seen, in the same
format), into tests/mutants/regression-results.json.

Each mutant is (id, file, the exact text it changes, the replacement, its area's test files).
`find` must occur exactly once in the file (a line, with a neighbour where needed to be unique).
`equivalent` marks a mutant that no test can tell from the original, with the reason.
The area is the tests that exercise the mutated module, by file: what imports it, and the
end-to-end tests of the command it serves (AREAS, or the mutant's own `tests`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutant import Mutant  # noqa: E402

RESULTS = {  # where --write keeps each list's outcomes
    "independent": Path(__file__).resolve().parent / "independent-results.json",
    "regression": Path(__file__).resolve().parent / "regression-results.json",
    "heldout": Path(__file__).resolve().parent / "heldout-results.json",
    "heldout2": Path(__file__).resolve().parent / "heldout2-results.json",
    "heldout3": Path(__file__).resolve().parent / "heldout3-results.json",
    "heldout4": Path(__file__).resolve().parent / "heldout4-results.json",
    "heldout5": Path(__file__).resolve().parent / "heldout5-results.json",
    "heldout6": Path(__file__).resolve().parent / "heldout6-results.json",
}
TIMEOUT_S = 300


V = "tests/verdicts/"
E = "tests/evidence/"
L = "tests/launch/"
S = "tests/store/"
C = "tests/cache/"
J = "tests/jobs/"
K = "tests/commands/"
P = "tests/properties/"

# The tests of each module's area: those that import it, and the command-level tests of what
# it decides (the slow multi-process and SLURM files are left out: see --baseline for times).
AREAS: dict[str, tuple[str, ...]] = {
    "pgle/verdicts/checker.py": (V + "test_thresholds.py", P + "test_version_boundaries.py"),
    "pgle/verdicts/collectives.py": (
        P + "test_version_boundaries.py",
        V + "test_thresholds.py",
        V + "test_collectives.py",
        V + "test_verdict.py",
    ),
    "pgle/verdicts/sync_converted.py": (
        V + "test_executed_by_name.py",
        V + "test_sync_converted.py",
        V + "test_thresholds.py",
        P + "test_version_boundaries.py",
    ),
    "pgle/verdicts/across_ranks.py": (
        V + "test_require_applied_job.py",
        V + "test_thresholds.py",
        J + "test_multiprocess_units.py",
    ),
    # tests/commands/test_recipes.py also imports it; with test_auto.py it takes over 5 minutes.
    "pgle/verdicts/auto_pgle.py": (V + "test_auto_empty_profiles.py", K + "test_auto.py"),
    "pgle/verdicts/require.py": (V + "test_require_units.py", V + "test_verdict.py"),
    "pgle/evidence/steps.py": (
        P + "test_stats_props.py",
        E + "test_step_times.py",
        L + "test_marked_step_timing.py",
    ),
    "pgle/evidence/log_version.py": (
        E + "test_version_inference.py",
        P + "test_version_boundaries.py",
        E + "test_version_rules.py",
    ),
    "pgle/evidence/logscan.py": (
        E + "test_version_inference.py",
        P + "test_log_lines.py",
        E + "test_logscan_prefilter.py",
        E + "test_version_rules.py",
        V + "test_verdict.py",
    ),
    "pgle/evidence/xla_log.py": (
        E + "test_version_inference.py",
        V + "test_verdict.py",
        E + "test_version_rules.py",
        E + "test_caps.py",
        P + "test_log_lines.py",
    ),
    "pgle/evidence/compiles.py": (
        L + "test_mixed_executables.py",
        L + "test_step_cache_labels.py",
        V + "test_warm_cache.py",
        E + "test_compile_threads.py",
    ),
    "pgle/launch/streams.py": (
        L + "test_closed_stderr.py",
        L + "test_closed_std_fds.py",
        L + "test_terminal.py",
    ),
    "pgle/launch/childenv.py": (L + "test_childenv_defaults.py", L + "test_launch_units.py"),
    "pgle/launch/runfolder.py": (
        L + "test_claimed_files.py",
        K + "test_runs_other_hosts.py",
        L + "test_run_folders.py",
        L + "test_planted_files.py",
        K + "test_runs_hostile.py",
    ),
    "pgle/launch/pumps.py": (
        L + "test_line_after_partial.py",
        L + "test_terminal.py",
        L + "test_streams.py",
    ),
    # step_rule, execution and shared_folders: their in-process units (they import them)
    # joined the areas with heldout6 (2026-11-30), which they killed and the areas missed
    "pgle/launch/step_rule.py": (
        L + "test_step_module_names.py",
        L + "test_step_by_total_work.py",
        L + "test_step_forms.py",
        L + "test_step_timing.py",
        L + "test_step_rule_units.py",
    ),
    "pgle/launch/execution.py": (
        L + "test_interrupted_rank_exit.py",
        L + "test_signals.py",
        L + "test_execution_units.py",
    ),
    "pgle/store/store.py": (
        S + "test_store_ages.py",
        S + "test_store_source_redacted.py",
        S + "test_store_units.py",
        S + "test_store.py",
        S + "test_store_policy.py",
        P + "test_store_retention.py",
        S + "test_store_metadata_fingerprint.py",
        S + "test_store_hostile.py",
    ),
    "pgle/store/key.py": (S + "test_store_units.py", S + "test_store.py"),
    "pgle/store/policy.py": (S + "test_store_units.py", S + "test_store_policy.py"),
    "pgle/units.py": (S + "test_store_units.py", C + "test_cache_units.py", C + "test_cache.py"),
    "pgle/cache/key_rules.py": (C + "test_cache_units.py", P + "test_version_boundaries.py"),
    "pgle/cache/entries.py": (
        C + "test_cache_prune_selection.py",
        C + "test_cache_units.py",
        C + "test_cache.py",
        C + "test_cache_hostile.py",
    ),
    "pgle/cache/manifest.py": (
        C + "test_cache_prune_selection.py",
        C + "test_cache_units.py",
        C + "test_cache.py",
        C + "test_prune_under_another_users_run.py",
    ),
    "pgle/jobs/ranks.py": (
        J + "test_empty_launcher_variables.py",
        J + "test_ranks.py",
        J + "test_multiprocess_units.py",
    ),
    "pgle/jobs/layout.py": (
        J + "test_selected_ranks.py",
        J + "test_stall_timeout_values.py",
        J + "test_multiprocess_units.py",
        J + "test_ranks.py",
    ),
    "pgle/jobs/folder.py": (
        J + "test_gather_foreign_ranks.py",
        J + "test_multiprocess_units.py",
        J + "test_hostile_ranks.py",
    ),
    "pgle/commands/compare.py": (
        K + "test_compare_communication.py",
        K + "test_compare_direction.py",
        K + "test_tune_predict.py",
    ),
    "pgle/commands/arms.py": (
        K + "test_arms_rules.py",
        K + "test_compare_direction.py",
        K + "test_tune_labels.py",
    ),
    "pgle/commands/tune.py": (
        K + "test_tune_repeat.py",
        K + "test_compare_direction.py",
        K + "test_tune_phases.py",
        K + "test_command_units.py",
    ),
    "pgle/redact.py": (
        L + "test_secret_option_names.py",
        C + "test_cache_prune_selection.py",
        P + "test_redact_props.py",
        L + "test_redact_forms.py",
        L + "test_secret_positions.py",
        L + "test_secrets.py",
    ),
    "pgle/shared_folders.py": (
        "tests/test_shared_folders_units.py",
        S + "test_store_fifo_entry.py",
        C + "test_cache_prune_selection.py",
        S + "test_store_units.py",
        L + "test_planted_files.py",
        K + "test_runs_hostile.py",
        S + "test_store_safety.py",
    ),
    # Imported by the jobs units; `pgle run` end to end with a profile file and a directory.
    "pgle/commands/run.py": (
        J + "test_multiprocess_units.py",
        K + "test_manual_workflow.py",
        K + "test_collect_per_module.py",
    ),
    # Added with tests/mutants/heldout3.py: the tests that import each module, and the
    # end-to-end tests of its command (the slow multi-process files left out, as above).
    "pgle/verdicts/pgle_applied.py": (
        V + "test_verdict.py",
        V + "test_thresholds.py",
        V + "test_origin.py",
        V + "test_sync_converted.py",
        V + "test_warm_cache.py",
        P + "test_version_boundaries.py",
    ),
    "pgle/evidence/jax_log.py": (
        C + "test_cache_pgle_helper.py",
        K + "test_command_units.py",
        P + "test_log_lines.py",
        V + "test_auto_empty_profiles.py",
    ),
    "pgle/evidence/stacks.py": (J + "test_fleet_units.py", L + "test_stall.py"),
    "pgle/launch/launcher.py": (
        L + "test_exit_wait.py",
        L + "test_launch_units.py",
        L + "test_stall_progress.py",
        L + "test_streams.py",
        L + "test_terminal.py",
    ),
    "pgle/jobs/driver.py": (J + "test_driver_contracts.py", J + "test_multiprocess_units.py"),
    "pgle/jobs/rank_data.py": (J + "test_hostile_ranks.py", J + "test_gather_foreign_ranks.py"),
    # Added with tests/mutants/heldout6.py: the tests that import them, and the fleet's
    # end-to-end tests (a divergence named across real ranks, the first rank to stop).
    "pgle/jobs/divergence.py": (J + "test_fleet_units.py", J + "test_fleet_files.py",
                                J + "test_driver_edges.py", J + "test_fleet.py"),
    "pgle/jobs/first_stopped.py": (J + "test_fleet_units.py", J + "test_driver_edges.py",
                                   J + "test_layout_units.py", J + "test_fleet.py"),
    "pgle/commands/report.py": (
        "tests/analysis/test_report.py",
        "tests/analysis/test_report_value.py",
    ),
    "pgle/commands/collect.py": (
        K + "test_collect_per_module.py",
        K + "test_collect_trace.py",
        K + "test_collect_exit_codes.py",
        K + "test_trace_pooling.py",
        J + "test_multiprocess_units.py",
    ),
    # Added with tests/mutants/heldout4.py: the tests that import each module, and the
    # end-to-end tests of its command (the slow multi-process files left out, as above).
    "pgle/verdicts/origin.py": (V + "test_origin.py", V + "test_verdict.py"),
    "pgle/verdicts/rows.py": (
        V + "test_said_once.py",
        V + "test_verdict.py",
        E + "test_compile_threads.py",
    ),
    "pgle/evidence/step_file.py": (
        E + "test_step_file.py",
        E + "test_event_tail.py",
        E + "test_events_stream.py",
        L + "test_step_records.py",
    ),
    "pgle/launch/stall.py": (
        L + "test_stall.py",
        L + "test_stall_progress.py",
        L + "test_watchdog_signals.py",
        J + "test_layout_units.py",
    ),
    "pgle/store/serving.py": (S + "test_store_serving_units.py", S + "test_store_runs.py"),
    "pgle/commands/options.py": (
        K + "test_options_units.py",
        K + "test_collect_per_module.py",
        K + "test_tune_units.py",
    ),
    "pgle/commands/prewarm.py": (K + "test_prewarm.py", C + "test_cache.py"),
    "pgle/commands/nsys.py": (K + "test_nsys.py", K + "test_command_units.py"),
    # Added with tests/mutants/heldout5.py: the tests that run the harness in process (units
    # first: -x stops at the first failure), then the end-to-end tests of the window, the step
    # times and the step's choice (real JAX on CPU).
    "pgle/launch/harness.py": (
        L + "test_completion_watcher.py",
        L + "test_harness_units.py",
        L + "test_profiler_window.py",
        L + "test_step_records.py",
        L + "test_events_flush.py",
        L + "test_progress.py",
        L + "test_probe_units.py",
        E + "test_run_steps.py",
        L + "test_step_timing.py",
        L + "test_marked_step_timing.py",
        L + "test_step_forms.py",
        L + "test_step_by_total_work.py",
        L + "test_mixed_executables.py",
        L + "test_step_module_names.py",
        L + "test_delay_origin.py",
        L + "test_real_scripts.py",
    ),
    "pgle/launch/handoff.py": (
        L + "test_handoff_fetch.py",
        J + "test_kv_units.py",
        J + "test_kv_gather.py",
    ),
    "pgle/launch/jax_internals.py": (
        L + "test_step_frames.py",
        L + "test_kept_hlo.py",
        L + "test_handoff_fetch.py",
        L + "test_profiler_window.py",
        K + "test_collect_trace.py",
    ),
}

# Fails unmutated on a loaded 2-core machine (80000 lines through a pseudo-terminal arrive cut
# short at about 72000 while other jobs run): left out so it kills no mutant by accident.

M = Mutant
MUTANTS: tuple[Mutant, ...] = (
    # -- verdicts --------------------------------------------------------------------------
    M("V1", "pgle/verdicts/checker.py",
      "return SILENCE_FULL if jax >= WARN_PRINTS_SINCE else SILENCE_UNKNOWN",
      "return SILENCE_FULL if jax > WARN_PRINTS_SINCE else SILENCE_UNKNOWN",
      "jax 0.5.1 (the first whose WARN checker prints) judged as 0.5.0: silence unknown"),
    M("V2", "pgle/verdicts/checker.py",
      'level = (level or "WARN").upper()', 'level = (level or "ERROR").upper()',
      "an unset checker level taken as ERROR: silence proves full coverage on jax 0.4.36-0.5.0"),
    M("V3", "pgle/verdicts/checker.py",
      "if discards and inference.within(NEW_CHECKER_SINCE, None):",
      "if discards or inference.within(NEW_CHECKER_SINCE, None):",
      "a saved log of jax >= 0.4.36 without discards judged ERROR-strict"),
    M("V4", "pgle/verdicts/collectives.py",
      "enough = coverage is not None and coverage >= floor",
      "enough = coverage is not None and coverage > floor",
      "coverage exactly at --min-coverage judged partial"),
    M("V5", "pgle/verdicts/collectives.py",
      "DEFAULT_MIN_COVERAGE = 0.9", "DEFAULT_MIN_COVERAGE = 0.5",
      "the default coverage floor halved: 60% coverage called applied"),
    M("V6", "pgle/verdicts/collectives.py",
      "compute = missing - len(sync.converted)", "compute = missing",
      "collectives XLA made synchronous counted as missing compute"),
    M("V7", "pgle/verdicts/collectives.py",
      "if sol_fallback and min_coverage is None:", "if sol_fallback:",
      "the user's --min-coverage ignored where the SoL fallback applies"),
    M("V8", "pgle/verdicts/collectives.py",
      "if coverage is None or coverage == 0:", "if coverage is None:",
      "a module with 0% coverage not called not_applied"),
    M("V9", "pgle/verdicts/sync_converted.py",
      "return jax >= RENAMED_SINCE", "return jax > RENAMED_SINCE",
      "jax 0.11.1 (the first that renames converted pairs) judged as 0.11.0"),
    M("V10", "pgle/verdicts/sync_converted.py",
      "return same[0] if len(same) == 1 else None", "return same[0] if same else None",
      "a module name compiled twice matched to the first compile's HLO"),
    M("V11", "pgle/verdicts/across_ranks.py",
      'row["coverage"] = min(coverages) if coverages else None',
      'row["coverage"] = max(coverages) if coverages else None',
      "a job's coverage per module is the best rank's, not the worst"),
    M("V12", "pgle/verdicts/across_ranks.py",
      "if len(by_status) == 1 and not absent:", "if len(by_status) == 1:",
      "a module absent on some ranks judged by the ranks that have it"),
    M("V13", "pgle/verdicts/across_ranks.py",
      'row["instructions_missing"] = max(miss) if miss else None',
      'row["instructions_missing"] = min(miss) if miss else None',
      "a job's missing instructions per module is the best rank's"),
    M("V14", "pgle/verdicts/across_ranks.py",
      "report.exit_code = EXIT_NOT_VERIFIED if require_applied and status != Applied.APPLIED",
      "report.exit_code = EXIT_NOT_VERIFIED if require_applied and status == Applied.NOT_APPLIED",
      "--require-applied passes a partial job"),
    M("V15", "pgle/verdicts/across_ranks.py",
      "expected = [r for r, s in rank_status.items() if s != Applied.NOT_APPLICABLE]",
      "expected = list(rank_status)",
      "ranks without a GPU counted as absent from every module"),
    M("V16", "pgle/verdicts/auto_pgle.py",
      "elif facts.observed and m.profiled >= row.runs and m.empty_profiles >= m.profiled:",
      "elif facts.observed and m.profiled >= row.runs and m.empty_profiles > 0:",
      "one empty profile among several calls the module's profile empty"),
    M("V17", "pgle/verdicts/auto_pgle.py",
      'if platform and platform not in ("gpu", "cuda"):',
      'if platform and platform not in ("gpu", "cuda", "cpu"):',
      "the empty-profile cause on CPU not said"),
    M("V18", "pgle/verdicts/require.py",
      "if missed and report.exit_code == 0:", "if missed and report.exit_code != 0:",
      "--require failing does not exit 3"),
    # -- evidence -----------------------------------------------------------------------------
    M("E1", "pgle/evidence/steps.py",
      "if index[k] != 0 and index[k] not in exclude", "if index[k] not in exclude",
      "the compile step's time counted in step times"),
    M("E2", "pgle/evidence/steps.py",
      "k = (n - 1) * p", "k = n * p",
      "p25/p75 of step times off (interpolated at the wrong rank)"),
    M("E3", "pgle/evidence/log_version.py",
      "if first is not None and (low is None or first > low):",
      "if first is not None and (low is None or first < low):",
      "a log's lower version bound is the weakest clue, not the strongest"),
    M("E4", "pgle/evidence/log_version.py",
      "and all(n in table[k] if k in table else k not in KINDS for k, n in numbered.items())",
      "and any(n in table[k] if k in table else k not in KINDS for k, n in numbered.items())",
      "one agreeing source line pins a log to a jax version"),
    M("E5", "pgle/evidence/log_version.py",
      "hi_ok = high is None or (self.high is not None and self.high <= high)",
      "hi_ok = high is None or self.high is None or self.high <= high",
      "a log with no upper version bound judged within any upper bound"),
    M("E6", "pgle/evidence/log_version.py",
      "return (low is None or v >= low) and (high is None or v[: len(high)] <= high)",
      "return (low is None or v >= low) and (high is None or v[: len(high)] < high)",
      "a lane version at a feature's last version excluded"),
    M("E7", "pgle/evidence/logscan.py",
      'USING_PROFILE = re.compile(r"^Using PGLE profile from (?P<path>.+?)\\s*$")',
      'USING_PROFILE = re.compile(r"^Using PGLE profile from (?P<path>\\S+?)\\s*$")',
      "a profile path with a space not recognised as read"),
    M("E8", "pgle/evidence/xla_log.py",
      'elif fm.group(2) == "pb":', 'elif fm.group(2) == "pbtxt":',
      "a missing <fp>.pbtxt (XLA then tries .pb) taken as no profile"),
    M("E9", "pgle/evidence/compiles.py",
      'return kinds.pop() if len(kinds) == 1 else "mixed"',
      'return kinds.pop() if len(kinds) >= 1 else "mixed"',
      "compiled and cached executables not reported as mixed"),
    # -- launch -------------------------------------------------------------------------------
    M("L1", "pgle/launch/streams.py",
      "return any(usable(fd) and write_line(fd, line) for fd in (2, 1))",
      "return any(usable(fd) and write_line(fd, line) for fd in (2,))",
      "with stderr closed pgle's lines are lost instead of going to stdout"),
    M("L2", "pgle/launch/childenv.py",
      "environ.setdefault(key, value)", "environ[key] = value",
      "pgle's defaults override the user's own variables"),
    M("L3", "pgle/launch/runfolder.py",
      "LEASE_TTL_SECONDS = 600.0", "LEASE_TTL_SECONDS = 60.0",
      "a live run's lease stale after a minute: runs prune deletes it"),
    M("L4", "pgle/launch/runfolder.py",
      "for name in (LOG_NAME, EVENTS_NAME):", "for name in (LOG_NAME,):",
      "the events file not claimed with O_EXCL: a planted one is used"),
    M("L5", "pgle/launch/pumps.py",
      "and SEVERITIES.index(parsed.severity) < level",
      "and SEVERITIES.index(parsed.severity) <= level",
      "XLA's warnings hidden from the terminal at the default level"),
    M("L6", "pgle/launch/pumps.py",
      'and not parsed.file.endswith(".py")', "and True",
      "the program's own absl INFO lines hidden from the terminal"),
    M("L7", "pgle/launch/pumps.py",
      'self._put(b"\\n" + b"".join(self.queued))', 'self._put(b"".join(self.queued))',
      "pgle's line glued to a workload's last line without newline"),
    M("L8", "pgle/launch/step_rule.py",
      '_SANITIZE = re.compile(r"[^\\w.-]")', '_SANITIZE = re.compile(r"[^\\w.]")',
      "a step function with '-' in its name maps to no module"),
    M("L9", "pgle/launch/step_rule.py",
      'return _SANITIZE.sub("_", function).rstrip("_")', 'return _SANITIZE.sub("_", function)',
      "jit(f) maps to jit_f_, not jax's module jit_f"),
    M("L10", "pgle/launch/step_rule.py",
      "if (f.get(\"executions\") or 0) >= min_executions]",
      "if (f.get(\"executions\") or 0) > min_executions]",
      "a function executed exactly 3 times not a step"),
    M("L11", "pgle/launch/step_rule.py",
      'return (function.get("work_s") or 0.0) / known * (function.get("executions") or 0)',
      'return (function.get("work_s") or 0.0) / known',
      "the step picked by mean work per execution, not total work"),
    M("L12", "pgle/launch/execution.py",
      "on_exit(128 + result.interrupted if result.interrupted else result.exit_code)",
      "on_exit(result.interrupted if result.interrupted else result.exit_code)",
      "an interrupted run exits 2 (the signal number) rather than 130"),
    # -- store --------------------------------------------------------------------------------
    M("S1", "pgle/store/store.py",
      "or (older_than is not None and e.age_seconds(now) > older_than)",
      "or (older_than is not None and e.age_seconds(now) < older_than)",
      "store prune --older-than removes the new entries"),
    M("S2", "pgle/store/store.py",
      "for e in mine if not dry_run else []:", "for e in mine:",
      "store prune --dry-run deletes"),
    M("S3", "pgle/store/store.py",
      "kept = policy.keep - 1", "kept = policy.keep",
      "keep:N keeps N+1 profiles"),
    M("S4", "pgle/store/store.py",
      "entries = self.entries(fingerprint, jax=jax, device_kind=device_kind)[-policy.keep :]",
      "entries = self.entries(fingerprint, jax=jax, device_kind=device_kind)[: policy.keep]",
      "serve merges (or serves) the oldest N entries"),
    M("S5", "pgle/store/store.py",
      "FUTURE_SKEW_SECONDS = 3600.0", "FUTURE_SKEW_SECONDS = 3600.0e3",
      "an entry dated weeks ahead accepted (its name sorts it newest forever)"),
    M("S6", "pgle/store/store.py",
      "source=redact_text(source),", "source=source,",
      "a secret in the workload's command stored in store metadata"),
    M("S7", "pgle/store/store.py",
      "if e.jax == jax and e.device_kind == device_kind", "if e.jax == jax",
      "adding under one device kind trims another kind's profiles"),
    M("S8", "pgle/store/key.py",
      '("device kind", planned.device_kind, actual.device_kind),',
      '("device kind", planned.device_kind, planned.device_kind),',
      "a run on another device kind than its view not reported"),
    M("S9", "pgle/store/policy.py",
      "(m.group(2) is None or int(m.group(2)) <= 100)",
      "(m.group(2) is None or int(m.group(2)) < 100)",
      "merge:N:p100 refused"),
    M("S10", "pgle/units.py",
      '"d": 86400', '"d": 3600',
      "--older-than 7d means 7 hours"),
    # -- cache --------------------------------------------------------------------------------
    M("C1", "pgle/cache/key_rules.py",
      "if version is not None and version < XLA_CACHES_SINCE:",
      "if version is not None and version <= XLA_CACHES_SINCE:",
      "jax 0.4.36 (first with XLA caches in the key) judged as 0.4.35"),
    M("C2", "pgle/cache/key_rules.py",
      "if version is None or version >= AUTOTUNE_PATH_NOT_IN_KEY_SINCE:\n        return kernel",
      "if version is None or version > AUTOTUNE_PATH_NOT_IN_KEY_SINCE:\n        return kernel",
      "jax 0.11.0 judged as holding the autotune path in the key"),
    M("C3", "pgle/cache/key_rules.py",
      'kernel = value == "all" or KERNEL_CACHE in value', "kernel = KERNEL_CACHE in value",
      "XLA caches 'all' not counted as the kernel cache"),
    M("C4", "pgle/cache/entries.py",
      'int.from_bytes(raw[:8], "little") / 1e9)', 'int.from_bytes(raw[:8], "little") / 1e6)',
      "the atime stamp read as microseconds: used entries never old"),
    M("C5", "pgle/cache/entries.py",
      "if older_than is not None and now - last_used(cache_dir, e) < older_than:",
      "if older_than is not None and now - e.mtime < older_than:",
      "cache prune --older-than ignores JAX's access stamps: used entries deleted"),
    M("C6", "pgle/cache/entries.py",
      "for suffix in (CACHE_SUFFIX, ATIME_SUFFIX):", "for suffix in (CACHE_SUFFIX,):",
      "a pruned entry's -atime file left behind"),
    M("C7", "pgle/cache/entries.py",
      "return any(fnmatch.fnmatchcase(module, p) for p in patterns)",
      "return all(fnmatch.fnmatchcase(module, p) for p in patterns)",
      "several --module globs select only modules matching all"),
    M("C8", "pgle/cache/manifest.py",
      'elif time.time() - float(run.get("started") or 0) < STALE_REMOTE_RUN_SECS:',
      'elif time.time() - float(run.get("started") or 0) > STALE_REMOTE_RUN_SECS:',
      "another host's fresh prewarm taken as finished, its stale one as live"),
    M("C9", "pgle/cache/manifest.py",
      "not 0 < pid <= 1 << 22", "not 0 <= pid <= 1 << 22",
      "a forged pid 0 (kill(0) signals the group) taken as a live run"),
    M("C10", "pgle/units.py",
      '1024 ** " kmgt".index', '1000 ** " kmgt".index',
      "--max-size 5G is 5e9 bytes, not 5 GiB as documented"),
    # -- jobs ---------------------------------------------------------------------------------
    M("J1", "pgle/jobs/ranks.py",
      "if not 0 <= info.rank < info.world_size:", "if not 0 <= info.rank <= info.world_size:",
      "a rank equal to the world size accepted"),
    M("J2", "pgle/jobs/ranks.py",
      'if value is not None and value.strip() != "":', "if value is not None:",
      "an empty launcher variable taken as set"),
    M("J3", "pgle/jobs/ranks.py",
      'head = uri[1].split(";", 1)[0].split(".", 1)[0]',
      'head = uri[1].split(";", 1)[0].split(".", 1)[-1]',
      "every Open MPI 4 job gets the job id '0'"),
    M("J4", "pgle/jobs/layout.py",
      "if max(request.selected_ranks) >= info.world_size:",
      "if max(request.selected_ranks) > info.world_size:",
      "--ranks naming the world size accepted"),
    M("J5", "pgle/jobs/layout.py",
      'if not 0 <= seconds < float("inf"):', 'if not seconds < float("inf"):',
      "--stall-timeout -5 accepted"),
    M("J6", "pgle/jobs/folder.py",
      "if rank >= world_size:\n                continue",
      "if rank > world_size:\n                continue",
      "a report named rank N of an N-rank job counted: a real rank's missing report unseen"),
    M("J7", "pgle/jobs/folder.py",
      "if not match or int(match.group(1)) == my_rank:", "if not match:",
      "a rank's own failure file read as another rank's"),
    # -- commands: compare, arms, tune --------------------------------------------------------
    M("K1", "pgle/commands/compare.py",
      '"exposed_ms_per_device": comm["exposed_ps"] / 1e9 / n,',
      '"exposed_ms_per_device": comm["exposed_ps"] / 1e6 / n,',
      "exposed communication shown 1000x too large (ps to ms)"),
    M("K2", "pgle/commands/compare.py",
      'n = max(comm["device_planes"], 1)', "n = 1",
      "communication time summed over devices, not per device"),
    M("K3", "pgle/commands/arms.py",
      "if len(before) < MIN_STEPS or len(after) < MIN_STEPS:",
      "if len(before) < MIN_STEPS and len(after) < MIN_STEPS:",
      "a ratio printed from 2 step times"),
    M("K4", "pgle/commands/arms.py",
      "jax is not None and jax < O1_SINCE:", "jax is not None and jax <= O1_SINCE:",
      "the o1 arm refused on jax 0.6.2, the first that has it"),
    M("K5", "pgle/commands/arms.py",
      'return {SOL_FLAG: "true"} if self.sol else {}', "return {}",
      "the sol arm runs without the SoL flag (same program as default)"),
    M("K6", "pgle/commands/arms.py",
      'name = "+".join(p for p in PARTS if p in parts)', 'name = "+".join(parts)',
      "pgle+o1 and o1+pgle run as two arms"),
    M("K7", "pgle/commands/arms.py",
      'out["profile_applied"] = bool(gpu and applied and baseline_dirs)',
      'out["profile_applied"] = bool(applied and baseline_dirs)',
      "tune on CPU labels runs 'with the profile'"),
    M("K8", "pgle/commands/tune.py",
      "repeat: int = 3", "repeat: int = 1",
      "tune's default --repeat 1, not the documented 3",
      equivalent="every caller passes repeat: the CLI's --repeat (click default 3, IntRange "
      "min 1) and pgle.api.tune(repeat=3); the dataclass default is never used"),
    M("K9", "pgle/commands/tune.py",
      "if self.repeat < 1:", "if self.repeat < 0:",
      "--repeat 0 accepted"),
    # -- redact -------------------------------------------------------------------------------
    M("R1", "pgle/redact.py", '    "PASSPHRASE",\n', "",
      "GPG_PASSPHRASE-style variables not redacted"),
    M("R2", "pgle/redact.py",
      "return bool(words & _OPTION_WORDS) or any(part in low for part in _OPTION_PARTS)",
      "return bool(words & _OPTION_WORDS)",
      "--githubtoken=x / --db_password_file x style options not redacted"),
    M("R3", "pgle/redact.py",
      "[^\\s'\\\"@]+(?=@)\")", "[^\\s'\\\"@/]+(?=@)\")",
      "a URL password holding '/' (AWS secret keys) not redacted"),
    M("R4", "pgle/redact.py",
      "    re.IGNORECASE,\n)", "    0,\n)",
      "'Authorization: Basic ...' (capitalised, as HTTP writes it) not redacted"),
    M("R5", "pgle/redact.py",
      "                and _ENV_NAME.match(k)\n", "",
      "JSON keys like cache_key or token_count redacted (the record loses its data)"),
    M("R6", "pgle/redact.py",
      'if not bare or bare.lower().startswith("xla_"):', "if not bare:",
      "XLA flags whose names hold a secret word redacted"),
    M("R7", "pgle/redact.py",
      "            and \"=\" not in arg\n", "",
      "--token=x hides the next, unrelated argument"),
    # -- shared_folders -----------------------------------------------------------------------
    M("F1", "pgle/shared_folders.py",
      "return parent == real_root or parent.startswith(real_root.rstrip(os.sep) + os.sep)",
      "return parent == real_root or parent.startswith(real_root.rstrip(os.sep))",
      "a sibling folder /store-evil taken as inside /store"),
    M("F2", "pgle/shared_folders.py",
      "        if not stat.S_ISREG(st.st_mode):\n"
      "            raise NotAFile(shown, what, \"not a regular file\")\n        if limit",
      "        if False:\n"
      "            raise NotAFile(shown, what, \"not a regular file\")\n        if limit",
      "a FIFO or device in a shared folder read (blocks or never ends)"),
    M("F3", "pgle/shared_folders.py",
      "op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX", "op = fcntl.LOCK_SH",
      "an exclusive lock is shared: two writers at once"),
    M("F4", "pgle/shared_folders.py",
      "return file_mode() & stat.S_IMODE(source_mode)", "return file_mode()",
      "a copy of a private (0600) file made world-readable"),
    M("F5", "pgle/shared_folders.py",
      "if expect is not None and not os.path.samestat(st, expect):",
      "if expect is not None and not os.path.samestat(st, st):",
      "a folder replaced since pgle checked it deleted anyway"),
    M("F6", "pgle/shared_folders.py",
      "if stat.S_ISLNK(st.st_mode) and st.st_uid in (os.geteuid(), 0):",
      "if stat.S_ISLNK(st.st_mode):",
      "another user's link followed where only the user's own is"),
    M("F7", "pgle/shared_folders.py",
      "if limit is not None and st.st_size > limit:\n            raise NotAFile(shown,",
      "if limit is not None and st.st_size > limit * 1024:\n            raise NotAFile(shown,",
      "the size cap on a file read from a shared folder 1024x too high"),
)


def _copy_tree(dst: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file() and not src.is_symlink():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / name)
        elif src.is_symlink():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), dst / name)


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run_area(tree: Path, tests: tuple[str, ...], timeout: float) -> tuple[str, float, str]:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=tree, env=_env(tree), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - t0, ""
    out = (p.stdout + p.stderr).decode(errors="replace").strip().splitlines()
    failed = next((line for line in out if line.startswith(("FAILED", "ERROR"))), "")
    tail = failed or (out[-1] if out else "")
    if p.returncode == 0:
        return "survived", time.monotonic() - t0, tail
    if p.returncode == 5:
        return "no tests", time.monotonic() - t0, tail
    return "killed", time.monotonic() - t0, tail


def _apply(tree: Path, m: Mutant) -> str:
    path = tree / m.file
    text = path.read_text()
    if text.count(m.find) != 1:
        n = text.count(m.find)
        raise SystemExit(f"{m.id}: the text to mutate occurs {n} times in {m.file}")
    mutated = text.replace(m.find, m.replace)
    compile(mutated, str(path), "exec")  # a mutant is a bug, never a syntax error
    path.write_text(mutated)
    return text


def area(m: Mutant) -> tuple[str, ...]:
    return m.tests or AREAS[m.file]


def mutants_of(which: str) -> tuple[Mutant, ...]:
    if which == "independent":
        return MUTANTS
    if which.startswith("heldout"):  # tests/mutants/heldoutN.py: each written blind
        return importlib.import_module(which).MUTANTS
    import mutants  # tests/mutants/mutants.py: the regression list

    return mutants.MUTANTS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", dest="which", choices=sorted(RESULTS), default="independent",
                    help="the independent list (the measure; default), the regression list "
                    "(tests/mutants/mutants.py: bugs once seen) or the held-out list "
                    "(tests/mutants/heldout.py: written without reading the other two)")
    ap.add_argument("--only", action="append", default=[], help="mutant id (repeatable)")
    ap.add_argument("--package", action="append", default=[], help="verdicts, store, ...")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--check", action="store_true", help="each mutant applies, nothing runs")
    ap.add_argument("--baseline", action="store_true", help="run each area unmutated")
    ap.add_argument("--write", action="store_true", help="save results (--out)")
    ap.add_argument("--out", type=Path, help="where --write saves them (default: by --set, "
                    "tests/mutants/independent-results.json or regression-results.json)")
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S)
    args = ap.parse_args(argv)
    args.out = args.out or RESULTS[args.which]
    listed = mutants_of(args.which)
    ids = [m.id for m in listed]
    assert len(ids) == len(set(ids)), "duplicate mutant ids"
    chosen = [
        m for m in listed
        if (not args.only or m.id in args.only) and (not args.package or m.package in args.package)
    ]
    if args.list:
        for m in chosen:
            print(f"{m.id:4} {m.package:15} {m.file}: {m.why}")
        return 0
    with tempfile.TemporaryDirectory(prefix="pgle-mutants-") as tmp:
        tree = Path(tmp) / "tree"
        _copy_tree(tree)
        if args.check:
            for m in chosen:
                original = _apply(tree, m)
                (tree / m.file).write_text(original)
            print(f"{len(chosen)} mutants apply")
            return 0
        if args.baseline:
            bad = 0
            for tests in sorted({area(m) for m in chosen}):
                outcome, secs, tail = _run_area(tree, tests, args.timeout)
                ok = outcome == "survived"
                bad += not ok
                shown = f"{' '.join(tests)} {'' if ok else tail}"
                print(f"{'ok ' if ok else 'BAD'} {secs:6.1f}s {shown}")
            return 1 if bad else 0
        results: dict[str, dict] = {}
        for m in chosen:
            original = _apply(tree, m)
            try:
                if m.equivalent:
                    outcome, secs, tail = "equivalent", 0.0, m.equivalent
                else:
                    outcome, secs, tail = _run_area(tree, area(m), args.timeout)
            finally:
                (tree / m.file).write_text(original)
            results[m.id] = {
                "package": m.package, "file": m.file, "outcome": outcome,
                "seconds": round(secs, 1), "why": m.why, "detail": tail,
            }
            print(f"{m.id:4} {outcome:10} {secs:6.1f}s {m.file}: {m.why}", flush=True)
            if args.write:  # after each mutant: an interrupted run keeps what it measured
                _save(args.out, {m.id: results[m.id]})
    print(summary(results))
    return 0 if all(r["outcome"] != "survived" for r in results.values()) else 1


def _save(path: Path, results: dict[str, dict]) -> None:
    old = json.loads(path.read_text()) if path.exists() else {}
    old.update(results)
    path.write_text(json.dumps(old, indent=1, sort_keys=True) + "\n")


def summary(results: dict[str, dict]) -> str:
    """Killed / counted per package (timeouts count as killed, equivalents are not counted)."""
    per: dict[str, list[int]] = {}
    for r in results.values():
        k = per.setdefault(r["package"], [0, 0])
        if r["outcome"] in ("equivalent", "no tests"):
            continue
        k[1] += 1
        k[0] += r["outcome"] in ("killed", "timeout")
    lines = [f"{p:15} {k}/{n} killed ({k / n:.0%})" for p, (k, n) in sorted(per.items()) if n]
    killed, counted = sum(k for k, _ in per.values()), sum(n for _, n in per.values())
    if counted:
        lines.append(f"{'all':15} {killed}/{counted} killed ({killed / counted:.0%})")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
