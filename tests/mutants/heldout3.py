"""Held-out mutants, third round (issue 37): 50 realistic one-line bugs written from the product
code alone, by a writer who read none of the other lists (tests/mutants/mutants.py,
independent.py's MUTANTS, heldout.py, heldout2.py) nor any result of theirs: the measure of
what the tests catch on bugs nobody listed for them.

    python3 tests/mutants/independent.py --set heldout3 --check
    python3 tests/mutants/independent.py --set heldout3 --write   # -> heldout3-results.json

Spread by where a bug costs users most: verdicts 10, evidence 8, launch 7, store + cache 7,
shared_folders + redact 5, jobs 5, commands (compare/arms/tune/report/collect/run) 8.
"""

from __future__ import annotations

from mutant import Mutant

M = Mutant
MUTANTS: tuple[Mutant, ...] = (
    # -- verdicts (10) ------------------------------------------------------------------------
    M(
        "K01",
        "pgle/verdicts/collectives.py",
        "    enough = coverage is not None and coverage >= floor",
        "    enough = coverage is not None and coverage > floor",
        "a module at exactly --min-coverage (0.9 of 0.9) judged partial, not applied",
    ),
    M(
        "K02",
        "pgle/verdicts/collectives.py",
        "    if sol_fallback and min_coverage is None:",
        "    if sol_fallback:",
        "the SoL rule overrides a --min-coverage the user gave: a 50% module applied on H100",
    ),
    M(
        "K03",
        "pgle/verdicts/sync_converted.py",
        "    return jax >= RENAMED_SINCE",
        "    return jax > RENAMED_SINCE",
        "jax 0.11.1 (the first that renames converted pairs) judged as keeping the names",
    ),
    M(
        "K04",
        "pgle/verdicts/sync_converted.py",
        "        elif renamed is False:",
        "        elif not renamed:",
        "an unknown jax (renamed None) counts a missing async collective as surely missing",
    ),
    M(
        "K05",
        "pgle/verdicts/across_ranks.py",
        "    if len(by_status) == 1 and not absent:",
        "    if len(by_status) == 1:",
        "a module applied on the ranks that saw it, absent on others, judged applied for the job",
    ),
    M(
        "K06",
        "pgle/verdicts/across_ranks.py",
        "        row[\"coverage\"] = min(coverages) if coverages else None",
        "        row[\"coverage\"] = max(coverages) if coverages else None",
        "the job's coverage of a module is the best rank's, hiding the rank that misses most",
    ),
    M(
        "K07",
        "pgle/verdicts/require.py",
        "    if missed and report.exit_code == 0:",
        "    if missed:",
        "--require replaces the workload's own failure exit code with 3",
    ),
    M(
        "K08",
        "pgle/verdicts/checker.py",
        "    if discards and inference.within(NEW_CHECKER_SINCE, None):",
        "    if inference.within(NEW_CHECKER_SINCE, None):",
        "a 0.4.36-0.5.0 log under WARN (no discards) judged fully covered by the checker's silence",
    ),
    M(
        "K09",
        "pgle/verdicts/pgle_applied.py",
        "    if statuses and all(s == Applied.APPLIED for s in statuses):",
        "    if all(s == Applied.APPLIED for s in statuses):",
        "no module at all judged applied (all() of nothing is True)",
    ),
    M(
        "K10",
        "pgle/verdicts/pgle_applied.py",
        "    if require_applied and (status != Applied.APPLIED or coverage_unknown):",
        "    if require_applied and status != Applied.APPLIED:",
        "--require-applied passes where jax 0.4.36-0.5.0's WARN checker cannot prove coverage",
    ),
    # -- evidence (8) -------------------------------------------------------------------------
    M(
        "K11",
        "pgle/evidence/steps.py",
        "            if index[k] != 0 and index[k] not in exclude",
        "            if index[k] not in exclude",
        "the compile step (step 0 to step 1) counted as a step time: the median skews on short runs",
    ),
    M(
        "K12",
        "pgle/evidence/steps.py",
        "    keep = i[:-1] != 0",
        "    keep = i[1:] != 0",
        "over 4096 steps: the step after step 0 is left out instead of step 0's interval",
    ),
    M(
        "K13",
        "pgle/evidence/log_version.py",
        "        if last is not None and (high is None or last < high):",
        "        if last is not None and (high is None or last > high):",
        "the loosest upper bound wins: a log's jax range too wide, its silence unknown",
    ),
    M(
        "K14",
        "pgle/evidence/logscan.py",
        "        m.group(\"file\").decode(\"utf-8\", \"replace\").rsplit(\"/\", 1)[-1],",
        "        m.group(\"file\").decode(\"utf-8\", \"replace\").rsplit(\"/\", 1)[0],",
        "a tsl-prefixed line (jax < 0.7.2, full source path) gets the path's head as its file",
    ),
    M(
        "K15",
        "pgle/evidence/xla_log.py",
        "        since = [m for i, m in enumerate(ev.modules) if i > done and m.found_profile]",
        "        since = [m for i, m in enumerate(ev.modules) if i >= done and m.found_profile]",
        "a second discarded compile marks the module that already failed, not the new one",
        equivalent="a discard marks the newest module with a checker block since the last failed "
        "one; under ERROR every module that discards has missing instructions, so on each jax that "
        "prints a block (0.4.35 strict, >= 0.5.1) the new module has one and wins either way, and "
        "on 0.4.38/0.5.0 none has one and the newest wins either way; a discard repeated for the "
        "same module (the traceback's copy) re-marks it with the same message",
    ),
    M(
        "K16",
        "pgle/evidence/compiles.py",
        "            waiting.pop(0)[\"seconds\"] = float(r.seconds or 0.0)",
        "            waiting.pop()[\"seconds\"] = float(r.seconds or 0.0)",
        "compile seconds given to the last ended executable, not the first: times swapped",
        equivalent="at most one executable ever waits for its seconds: jax 0.10.2 records a "
        "compile's duration in pxla's log_elapsed_time right after compile_or_get_cached "
        "returns (its COMPILE_END), on a failure too, before the next compile begins; "
        "compiles in concurrent threads are paired by the open CompileBegin either way",
    ),
    M(
        "K17",
        "pgle/evidence/jax_log.py",
        "    return sorted(w for w in words if w.split(\"=\")[0].lstrip(\"-\") not in excluded)",
        "    return sorted(w for w in words if w.split(\"=\")[0] not in excluded)",
        "--xla_dump_to and the other excluded flags counted in the cache key: false key drift",
    ),
    M(
        "K18",
        "pgle/evidence/stacks.py",
        "    return next((f for f in frames if not is_library(f.file)), None)",
        "    return next((f for f in frames if is_library(f.file)), None)",
        "a stall report names a library frame instead of the user's line",
    ),
    # -- launch (7) ---------------------------------------------------------------------------
    M(
        "K19",
        "pgle/launch/streams.py",
        "    return any(usable(fd) and write_line(fd, line) for fd in (2, 1))",
        "    return any(usable(fd) and write_line(fd, line) for fd in (2,))",
        "with stderr closed or failing, pgle's lines are lost instead of going to stdout",
    ),
    M(
        "K20",
        "pgle/launch/childenv.py",
        "        environ.setdefault(key, value)",
        "        environ[key] = value",
        "pgle's defaults replace the user's own variables",
    ),
    M(
        "K21",
        "pgle/launch/execution.py",
        "        on_exit(128 + result.interrupted if result.interrupted else result.exit_code)",
        "        on_exit(result.exit_code)",
        "an interrupted rank whose workload exits 0 on SIGINT is not marked failed: peers run on",
    ),
    M(
        "K22",
        "pgle/launch/launcher.py",
        "        return max([self.start, *(p.last_read for p in self.pumps)])",
        "        return max([self.start, *(p.last_read for p in self.pumps[1:])])",
        "a workload printing to stdout only is not making progress: the stall watchdog stops it",
    ),
    M(
        "K23",
        "pgle/launch/pumps.py",
        "            and SEVERITIES.index(parsed.severity) < level",
        "            and SEVERITIES.index(parsed.severity) <= level",
        "XLA's WARNING lines hidden from the terminal with the INFO lines pgle turned on",
    ),
    M(
        "K24",
        "pgle/launch/runfolder.py",
        "                \"ttl_seconds\": LEASE_TTL_SECONDS,",
        "                \"ttl_seconds\": LEASE_REFRESH_SECONDS,",
        "a run's lease expires at its refresh interval: `runs prune` may take a live run as dead",
        equivalent="nothing reads the lease's ttl_seconds: `pgle runs` judges a lease by its own "
        "LEASE_TTL_SECONDS (pgle/commands/runs.py), on this host and any other",
    ),
    M(
        "K25",
        "pgle/launch/step_rule.py",
        "    return [f for f in functions if (f.get(\"executions\") or 0) >= min_executions]",
        "    return [f for f in functions if (f.get(\"executions\") or 0) > min_executions]",
        "a step run exactly 3 times is not a candidate: no step found on a short run",
    ),
    # -- store + cache (7) ------------------------------------------------------------------
    M(
        "K26",
        "pgle/store/policy.py",
        "    if m and int(m.group(1)) >= 1:\n        return Policy(keep=int(m.group(1)), merge=False)",
        "    if m and int(m.group(1)) >= 0:\n        return Policy(keep=int(m.group(1)), merge=False)",
        "--store-policy keep:0 accepted: a store that keeps nothing (or everything)",
    ),
    M(
        "K27",
        "pgle/store/key.py",
        "    if len(kinds) != 1:",
        "    if len(kinds) > 1:",
        "a probe that found no device crashes (IndexError) instead of one clear line",
        equivalent="the probe child never reports an empty device list: jax.devices() either "
        "lists devices or raises, and devs[0] on an empty list raises into the error field, "
        "which from_probe answers first (pgle/launch/probe.py)",
    ),
    M(
        "K28",
        "pgle/store/store.py",
        "                        (keep is not None and newer >= keep)",
        "                        (keep is not None and newer > keep)",
        "`store prune --keep N` keeps N+1 entries per module",
    ),
    M(
        "K29",
        "pgle/store/store.py",
        "        kept = policy.keep - 1",
        "        kept = policy.keep",
        "the store policy keep:N keeps N+1 entries after an add (replace keeps two)",
    ),
    M(
        "K30",
        "pgle/cache/key_rules.py",
        "    if version is not None and version < XLA_CACHES_SINCE:",
        "    if version is not None and version <= XLA_CACHES_SINCE:",
        "jax 0.4.36 (the first with XLA caches in the key) said to key without the cache dir",
    ),
    M(
        "K31",
        "pgle/cache/entries.py",
        "        return max(e.mtime, int.from_bytes(raw[:8], \"little\") / 1e9)",
        "        return max(e.mtime, int.from_bytes(raw[:8], \"big\") / 1e9)",
        "jax's -atime files read big-endian: every entry looks used in the far future, "
        "`cache prune --older-than` removes nothing",
    ),
    M(
        "K32",
        "pgle/cache/manifest.py",
        "        elif time.time() - float(run.get(\"started\") or 0) < STALE_REMOTE_RUN_SECS:",
        "        elif time.time() - float(run.get(\"started\") or 0) > STALE_REMOTE_RUN_SECS:",
        "another host's fresh run taken as dead (and a stale one as live): prune proceeds under it",
    ),
    # -- shared_folders + redact (5) --------------------------------------------------------
    M(
        "K33",
        "pgle/shared_folders.py",
        "    return parent == real_root or parent.startswith(real_root.rstrip(os.sep) + os.sep)",
        "    return parent == real_root or parent.startswith(real_root.rstrip(os.sep))",
        "a sibling folder sharing the root's prefix (/store-evil next to /store) counts as inside",
    ),
    M(
        "K34",
        "pgle/shared_folders.py",
        "        and name not in (\"\", \".\", \"..\")",
        "        and name not in (\"\", \".\")",
        "`..` accepted as a name inside a shared folder: one level out of the root",
    ),
    M(
        "K35",
        "pgle/shared_folders.py",
        "    try:\n        st = os.fstat(fd)\n        if not stat.S_ISREG(st.st_mode):\n            raise NotAFile(shown, what, \"not a regular file\")\n        if limit",
        "    try:\n        st = os.fstat(fd)\n        if stat.S_ISDIR(st.st_mode):\n            raise NotAFile(shown, what, \"not a regular file\")\n        if limit",
        "a FIFO or device planted in a shared folder is read as if a file",
    ),
    M(
        "K36",
        "pgle/redact.py",
        "        and \":\" not in text\n",
        "",
        "`Authorization: Basic xyz` (no `=`, no option, no URL) skipped by the fast path: leaked",
    ),
    M(
        "K37",
        "pgle/redact.py",
        "    words = set(re.split(r\"[-_.]+\", low))",
        "    words = set(re.split(r\"[-_]+\", low))",
        "`--db.pass x` / `db.pwd=x`: dotted option names are not split, their secrets leak",
    ),
    # -- jobs (5) -----------------------------------------------------------------------------
    M(
        "K38",
        "pgle/jobs/ranks.py",
        "    if not 0 <= info.rank < info.world_size:",
        "    if not 0 <= info.rank <= info.world_size:",
        "PGLE_RANK=4 with PGLE_WORLD_SIZE=4 accepted: a rank outside the job",
    ),
    M(
        "K39",
        "pgle/jobs/folder.py",
        "            if rank >= world_size:\n                continue",
        "            if rank > world_size:\n                continue",
        "a foreign rank-N.json (N = world size) counted: gather ends before a real rank reports",
    ),
    M(
        "K40",
        "pgle/jobs/layout.py",
        "        if max(request.selected_ranks) >= info.world_size:",
        "        if max(request.selected_ranks) > info.world_size:",
        "--ranks 4 on a 4-rank job accepted: no rank does the work, no clear error",
    ),
    M(
        "K41",
        "pgle/jobs/driver.py",
        "        failure = folder.peer_failure(self.job_dir, -1)",
        "        failure = folder.peer_failure(self.job_dir, self.rank)",
        "rank 0's own failure is left out of the job's exit code and reasons",
    ),
    M(
        "K42",
        "pgle/jobs/rank_data.py",
        "    if not directory and st.st_nlink != 1:",
        "    if directory and st.st_nlink != 1:",
        "a rank's report hard-linked to another file is read (another account's file)",
    ),
    # -- commands (8) -------------------------------------------------------------------------
    M(
        "K43",
        "pgle/commands/compare.py",
        "        row[\"interval\"], row[\"why_no_ratio\"] = arms.ratio(base_times, sample[row[\"arm\"]])",
        "        row[\"interval\"], row[\"why_no_ratio\"] = arms.ratio(sample[row[\"arm\"]], base_times)",
        "`tune --compare`: every arm's ratio to default inverted (faster reads as slower)",
    ),
    M(
        "K44",
        "pgle/commands/arms.py",
        "        times += steps.times",
        "        times = list(steps.times)",
        "--repeat: only the last run of an arm is pooled, the others are dropped",
    ),
    M(
        "K45",
        "pgle/commands/tune.py",
        "    lead = next((e for e in runs if e.arm.pgle and e.reports), None) or next(",
        "    lead = next((e for e in runs if e.reports), None) or next(",
        "`tune --compare`: the verdict is taken from the default arm (no profile), not a pgle arm",
    ),
    M(
        "K46",
        "pgle/commands/tune.py",
        "        if self.repeat < 1:",
        "        if self.repeat < 0:",
        "`tune --repeat 0` accepted: no arm runs, a traceback instead of exit 2",
    ),
    M(
        "K47",
        "pgle/commands/report.py",
        "        elif r[\"beyond_noise\"] and r[\"ratio\"] < 1:",
        "        elif r[\"beyond_noise\"] and r[\"ratio\"] > 1:",
        "`pgle report` says keep the profile when it makes steps slower (and the reverse)",
    ),
    M(
        "K48",
        "pgle/commands/report.py",
        "        p = top / (base if i == 1 else f\"{base}-{i}\")",
        "        p = top / (base if i == 1 else f\"{base}-{i + 1}\")",
        "`pgle report` on a tune folder from before tune.json skips run-2 and every repeat after it",
    ),
    M(
        "K49",
        "pgle/commands/collect.py",
        "    if report.exit_code != 0 or not ex.run.trace.is_dir():",
        "    if not ex.run.trace.is_dir():",
        "--no-keep-trace deletes the trace of a failed collect: nothing is left to look at",
    ),
    M(
        "K50",
        "pgle/commands/run.py",
        "    child = childenv.build(environ, xla=xla, variables=dict(opts.env), info_log=True)",
        "    child = childenv.build(environ, xla=xla, defaults=dict(opts.env), info_log=True)",
        "tune's o1 arm keeps the user's own JAX_OPTIMIZATION_LEVEL: it measures default against default",
    ),
)
