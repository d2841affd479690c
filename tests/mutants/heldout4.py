"""A fourth held-out list (issue 37): 50 realistic one-line bugs written from the product code
alone, blind to the project's own list (tests/mutants/mutants.py), to the earlier held-out lists
(heldout.py, heldout2.py, heldout3.py), to tests/mutants/independent.py's MUTANTS and to every
result of theirs. Each `why` is what a user would see go wrong. Run by the same runner:

    python3 tests/mutants/independent.py --set heldout4 --check   # each applies, nothing runs
    python3 tests/mutants/independent.py --set heldout4 --write   # the round

Spread: verdicts 10, evidence 8, launch 7, store + cache 7, shared_folders + redact 5, jobs 5,
commands 8 (pgle/launch/harness.py, pgle/commands/tune.py and compare.py are left alone).
"""

from __future__ import annotations

from mutant import Mutant

M = Mutant
MUTANTS: tuple[Mutant, ...] = (
    # -- verdicts (10) ---------------------------------------------------------------------------
    M("Q01", "pgle/verdicts/checker.py",
      "    if discards and inference.within(NEW_CHECKER_SINCE, None):",
      "    if inference.within(NEW_CHECKER_SINCE, None):",
      "`pgle verify` of a jax 0.4.36-0.5.0 WARN log (whose checker prints nothing) calls the "
      "silence full coverage: `applied` with no 'coverage unknown' note"),
    M("Q02", "pgle/verdicts/collectives.py",
      "    enough = coverage is not None and coverage >= floor",
      "    enough = coverage is not None and coverage > floor",
      "a module covered exactly at --min-coverage (0.9 by default) is judged `partial`"),
    M("Q03", "pgle/verdicts/origin.py",
      "if any(norm == r or norm.startswith(r.rstrip(os.sep) + os.sep) for r in roots):",
      "if any(norm == r or norm.startswith(r) for r in roots):",
      "XLA reading /data/prof-old.pb counts as the profile /data/prof pgle handed over: a "
      "foreign profile read is counted as applied"),
    M("Q04", "pgle/verdicts/require.py",
      "    if missed and report.exit_code == 0:",
      "    if missed:",
      "`--require` overwrites the workload's own failing exit code (e.g. 1, or 137) with 3"),
    M("Q05", "pgle/verdicts/sync_converted.py",
      "        elif renamed is False:",
      "        elif not renamed:",
      "a log of an unknown jax version: async collectives that may have been made synchronous "
      "are called missing (`partial`, rule collectives) instead of unresolved"),
    M("Q06", "pgle/verdicts/across_ranks.py",
      "    if len(by_status) == 1 and not absent:",
      "    if len(by_status) == 1:",
      "a module applied on the ranks that logged it but absent on other ranks is `applied` "
      "job-wide, not `partial`"),
    M("Q07", "pgle/verdicts/pgle_applied.py",
      "    if require_applied and (status != Applied.APPLIED or coverage_unknown):",
      "    if require_applied and status != Applied.APPLIED:",
      "--require-applied exits 0 on jax 0.4.36-0.5.0 WARN, where the coverage is unknown"),
    M("Q08", "pgle/verdicts/pgle_applied.py",
      "    if not (c.jax_imported is False and not c.modules and not c.evidence.reads):",
      "    if not (not c.jax_imported and not c.modules and not c.evidence.reads):",
      "`pgle verify` of a log without PGLE lines (jax import unknown) says the workload never "
      "imported jax, instead of 'no PGLE line in the log'"),
    M("Q09", "pgle/verdicts/auto_pgle.py",
      "m.profiled >= row.runs and m.empty_profiles >= m.profiled:",
      "m.profiled >= row.runs and m.empty_profiles > 0:",
      "one empty profile among several profiled executions marks the module `empty_profile` "
      "(with the CUPTI fix) though auto PGLE had other profiles"),
    M("Q10", "pgle/verdicts/rows.py",
      '        return f"collectives covered {total - len(missing)}/{total}"',
      '        return f"collectives covered {len(missing)}/{total}"',
      "the module line says 'collectives covered 1/8' when 7 of 8 are covered"),
    # -- evidence (8) ----------------------------------------------------------------------------
    M("Q11", "pgle/evidence/steps.py",
      "        k = (n - 1) * p",
      "        k = n * p",
      "p25/p75 step times read one rank too high (p75 of 4 steps is the max)"),
    M("Q12", "pgle/evidence/log_version.py",
      "        if first is not None and (low is None or first > low):",
      "        if first is not None and (low is None or first < low):",
      "a log with clues of several eras keeps the oldest lower bound: `verify` infers a wider "
      "jax range and misreads what the checker's silence means"),
    M("Q13", "pgle/evidence/logscan.py",
      'USING_PROFILE = re.compile(r"^Using PGLE profile from (?P<path>.+?)\\s*$")',
      'USING_PROFILE = re.compile(r"^Using PGLE profile from (?P<path>\\S+)\\s*$")',
      "a profile path with a space ('My Profiles/p.pbtxt') is never seen read: `not_applied`"),
    M("Q14", "pgle/evidence/xla_log.py",
      '        elif fm.group(2) == "pb":',
      '        elif fm.group(2) == "pbtxt":',
      "a directory holding <fp>.pb: XLA's miss on <fp>.pbtxt (tried first) marks the module as "
      "having no profile file, and a real miss on .pb is not reported"),
    M("Q15", "pgle/evidence/compiles.py",
      '    return kinds.pop() if len(kinds) == 1 else "mixed"',
      '    return kinds.pop() if kinds else "mixed"',
      "an arm whose executables were partly loaded from the cache is labelled `compiled` (or "
      "`cached`), never `mixed`"),
    M("Q16", "pgle/evidence/jax_log.py",
      '    return sorted(w for w in words if w.split("=")[0].lstrip("-") not in excluded)',
      '    return sorted(w for w in words if w.split("=")[0] not in excluded)',
      "`--xla_dump_to=...` and the other flags JAX keeps out of the cache key are counted in it: "
      "nsys/prewarm report a key drift that is not there"),
    M("Q17", "pgle/evidence/stacks.py",
      "    top = frames[0]",
      "    top = frames[-1]",
      "a stalled process waiting in `x.block_until_ready()` is reported as in the user's code, "
      "not waiting for the device"),
    M("Q18", "pgle/evidence/step_file.py",
      "        whole = len(data) - len(data) % RECORD_BYTES",
      "        whole = len(data)",
      "a step record half written when read is skipped past: every later step record is read "
      "misaligned (garbage step times)"),
    # -- launch (7) ------------------------------------------------------------------------------
    M("Q19", "pgle/launch/childenv.py",
      "        environ.setdefault(key, value)",
      "        environ[key] = value",
      "pgle's defaults override the user's own variables (their value silently replaced)"),
    M("Q20", "pgle/launch/runfolder.py",
      "LEASE_TTL_SECONDS = 600.0",
      "LEASE_TTL_SECONDS = 60.0",
      "`pgle runs prune` from another host deletes the folder of a live run whose lease was "
      "refreshed 61 s ago (refresh every 60 s)"),
    M("Q21", "pgle/launch/step_rule.py",
      '    if all(f.get("work_known") for f in ranked):',
      '    if any(f.get("work_known") for f in ranked):',
      "a train step whose outputs are donated (no known work) loses the step pick to a small "
      "eval function: wrong step module, wrong step times"),
    M("Q22", "pgle/launch/execution.py",
      "        on_exit(128 + result.interrupted if result.interrupted else result.exit_code)",
      "        on_exit(result.exit_code)",
      "a job rank interrupted by Ctrl-C/SIGTERM whose workload exited 0 records exit 0: peers "
      "are not stopped"),
    M("Q23", "pgle/launch/launcher.py",
      "    return 128 - returncode if returncode < 0 else returncode",
      "    return 128 + returncode if returncode < 0 else returncode",
      "a workload killed by SIGKILL exits pgle with 119 instead of 137 (shell convention)"),
    M("Q24", "pgle/launch/stall.py",
      "        if report_s is not None and quiet >= report_s and self.reported_since != last:",
      "        if report_s is not None and quiet >= report_s:",
      "--stall-timeout report:10m dumps stacks and prints a note on every poll after 10 "
      "quiet minutes, not once per quiet spell"),
    M("Q25", "pgle/launch/pumps.py",
      "            and SEVERITIES.index(parsed.severity) < level",
      "            and SEVERITIES.index(parsed.severity) <= level",
      "with the INFO log turned on by pgle, the terminal also hides XLA's WARNING lines"),
    # -- store + cache (7) -----------------------------------------------------------------------
    M("Q26", "pgle/store/policy.py",
      "    if m and int(m.group(1)) >= 1:\n"
      "        return Policy(keep=int(m.group(1)), merge=False)",
      "    if m and int(m.group(1)) >= 0:\n"
      "        return Policy(keep=int(m.group(1)), merge=False)",
      "`--policy keep:0` is accepted: the store keeps nothing it is given, or serves nothing"),
    M("Q27", "pgle/store/store.py",
      "                        (keep is not None and newer >= keep)",
      "                        (keep is not None and newer > keep)",
      "`pgle store prune --keep 2` keeps 3 entries per module"),
    M("Q28", "pgle/store/store.py",
      "                    if e.jax == jax and e.device_kind == device_kind\n",
      "                    if e.jax == jax\n",
      "adding an H100 profile under keep:N trims the A100 profiles of the same module and jax"),
    M("Q29", "pgle/store/serving.py",
      "    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()",
      "    return stat.S_ISDIR(st.st_mode)",
      "a store view folder made by another user under the views root is handed to XLA as ours"),
    M("Q30", "pgle/cache/key_rules.py",
      "    if version is None or version >= AUTOTUNE_PATH_NOT_IN_KEY_SINCE:\n        return kernel",
      "    if version is None or version > AUTOTUNE_PATH_NOT_IN_KEY_SINCE:\n        return kernel",
      "jax 0.11.0 is judged to hash the cache directory: `prewarm --relocatable` turns XLA's "
      "caches off there for nothing, and cache moves are warned about"),
    M("Q31", "pgle/cache/entries.py",
      '        return max(e.mtime, int.from_bytes(raw[:8], "little") / 1e9)',
      '        return max(e.mtime, int.from_bytes(raw[:8], "big") / 1e9)',
      "JAX's access stamp read big-endian: `cache prune --older-than` never prunes an entry "
      "that has an -atime file (its last use lies in the far future)"),
    M("Q32", "pgle/cache/manifest.py",
      '        elif time.time() - float(run.get("started") or 0) < STALE_REMOTE_RUN_SECS:',
      '        elif time.time() - float(run.get("started") or 0) > STALE_REMOTE_RUN_SECS:',
      "another host's prewarm that just started is taken as finished (cache prune proceeds "
      "under it), while long-dead ones block prune"),
    # -- shared_folders + redact (5) -------------------------------------------------------------
    M("Q33", "pgle/shared_folders.py",
      "    return parent == real_root or parent.startswith(real_root.rstrip(os.sep) + os.sep)",
      "    return parent == real_root or parent.startswith(real_root)",
      "a path in the sibling folder /shared/cache-evil passes as inside /shared/cache"),
    M("Q34", "pgle/shared_folders.py",
      "                if stat.S_ISLNK(st.st_mode) and st.st_uid in (os.geteuid(), 0):",
      "                if stat.S_ISLNK(st.st_mode):",
      "a `.pgle` link another user planted in a shared working folder is followed: run folders "
      "land where they chose"),
    M("Q35", "pgle/shared_folders.py",
      "                est = entry.stat(follow_symlinks=False)",
      "                est = entry.stat()",
      "deleting a run folder that holds a link to a folder fails half way ('was replaced') or "
      "walks the link's target"),
    M("Q36", "pgle/redact.py",
      '_BEARER = re.compile(r"(?P<head>\\bbearer\\s+)(?!<redacted>)[A-Za-z0-9._~+/=-]+", '
      're.IGNORECASE)',
      '_BEARER = re.compile(r"(?P<head>\\bbearer\\s+)(?!<redacted>)[A-Za-z0-9._~+/=-]+")',
      "`Bearer eyJ...` (the usual spelling) in an argument is written to spec.json and reports"),
    M("Q37", "pgle/redact.py",
      "_URL_PASSWORD = re.compile(r\"(?P<head>\\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\\s:/@'\\\"]+:)"
      "[^\\s'\\\"@]+(?=@)\")",
      "_URL_PASSWORD = re.compile(r\"(?P<head>\\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\\s:/@'\\\"]+:)"
      "[^\\s'\\\"@/]+(?=@)\")",
      "an S3 URL whose secret key holds `/` (s3://AKIA...:ab/cd@host) keeps its password"),
    # -- jobs (5) --------------------------------------------------------------------------------
    M("Q38", "pgle/jobs/ranks.py",
      "        slurm_step is not None\n        and _first(env, \"SLURM_PROCID\")",
      "        _first(env, \"SLURM_PROCID\")",
      "pgle in an sbatch script (no step yet) takes the batch shell for rank 0 of an "
      "SLURM_NTASKS-rank job and waits for ranks that never start"),
    M("Q39", "pgle/jobs/layout.py",
      "        if max(request.selected_ranks) >= info.world_size:",
      "        if max(request.selected_ranks) > info.world_size:",
      "`--ranks 0,8` in an 8-rank job is accepted: rank 8 never exists, one rank profiles"),
    M("Q40", "pgle/jobs/folder.py",
      "    _, rank, code = min(found)",
      "    _, rank, code = max(found)",
      "with several failed ranks, the job blames the last one to fail (often a victim of the "
      "first one's collectives)"),
    M("Q41", "pgle/jobs/rank_data.py",
      "    if not directory and st.st_nlink != 1:",
      "    if not directory and st.st_nlink > 2:",
      "a rank report hard-linked to another file (nlink 2) is read as this job's"),
    M("Q42", "pgle/jobs/driver.py",
      "            r, rep = errors[0]",
      "            r, rep = errors[-1]",
      "a job where pgle failed on several ranks names and exits with the highest rank's error, "
      "not rank order's first"),
    # -- commands (8) ----------------------------------------------------------------------------
    M("Q43", "pgle/commands/arms.py",
      "    if any(a.o1 for a in arms) and jax is not None and jax < O1_SINCE:",
      "    if any(a.o1 for a in arms) and jax is not None and jax <= O1_SINCE:",
      "`tune --compare o1` is refused on jax 0.6.2, the first jax with JAX_OPTIMIZATION_LEVEL"),
    M("Q44", "pgle/commands/collect.py",
      "        for p in ex.events.processes[1:]",
      "        for p in ex.events.processes[2:]",
      "`collect -- COMMAND` whose Python processes each profiled: the second process's trace "
      "is left out of the pooled profile"),
    M("Q45", "pgle/commands/run.py",
      '        compiled_anew=sum(1 for r in made if r["kind"] == "compiled"),',
      "        compiled_anew=len(made),",
      "a run whose every executable came from the warm compilation cache gets `not_applied` "
      "instead of the error saying XLA compiled nothing"),
    M("Q46", "pgle/commands/options.py",
      "(self.duration is not None and self.duration <= 0):",
      "(self.duration is not None and self.duration < 0):",
      "`collect --duration 0` is accepted: an empty trace window, then a confusing empty profile"),
    M("Q47", "pgle/commands/options.py",
      '        return self.per_module or (self.converter == "pgle" and self.qualify)',
      "        return self.per_module",
      "`collect --converter pgle --qualify` runs without fingerprint logging: entries cannot be "
      "qualified by module"),
    M("Q48", "pgle/commands/prewarm.py",
      'r.get("state") == "in_progress" or r in done[-KEEP_RUNS:]',
      'r.get("state") == "in_progress" or r in done[:KEEP_RUNS]',
      "after 20 prewarms the cache manifest drops each new finished run and keeps the oldest"),
    M("Q49", "pgle/commands/nsys.py",
      "                out += range(a, b + 1)",
      "                out += range(a, b)",
      "`pgle nsys --ranks 0-3` profiles ranks 0-2 only"),
    M("Q50", "pgle/commands/report.py",
      '        elif r["beyond_noise"] and r["ratio"] < 1:',
      '        elif r["beyond_noise"] and r["ratio"] > 1:',
      "`pgle report` tells the user to keep a profile that makes steps slower, and to drop one "
      "that makes them faster (with a negative %)"),
)
