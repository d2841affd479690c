"""A sixth held-out list (issue 37): 50 realistic one-line bugs written from the product code
alone, blind to every other mutant list, their results and the tests. Each `why` is what a
user would see go wrong. (verdicts 10, evidence 8, launch 7, store and cache 7, shared_folders
and redact 5, jobs 5, commands 8)
"""

from __future__ import annotations

from mutant import Mutant

M = Mutant
MUTANTS: tuple[Mutant, ...] = (
    # -- verdicts (10) -----------------------------------------------------------------------
    M("U01", "pgle/verdicts/checker.py",
      "    if jax < NEW_CHECKER_SINCE:",
      "    if jax <= NEW_CHECKER_SINCE:",
      "a jax 0.4.36 run (the first with the WARN checker) is judged as if it had no checker: "
      "its silent modules read 'coverage unverified' instead of 'coverage unknown'"),
    M("U02", "pgle/verdicts/checker.py",
      "WARN_PRINTS_SINCE = (0, 5, 1)",
      "WARN_PRINTS_SINCE = (0, 5, 0)",
      "on jax 0.5.0 the WARN checker prints nothing even when instructions are missing, yet a "
      "silent module is now counted fully covered: `applied` for a profile that may not fit"),
    M("U03", "pgle/verdicts/checker.py",
      "if discards and inference.within(NEW_CHECKER_SINCE, None):",
      "if discards or inference.within(NEW_CHECKER_SINCE, None):",
      "`pgle verify` of a silent jax 0.4.38/0.5.0 WARN log calls the coverage proven (applied) "
      "instead of unknown, though that checker prints nothing when instructions are missing"),
    M("U04", "pgle/verdicts/collectives.py",
      "enough = coverage is not None and coverage >= floor",
      "enough = coverage is not None and coverage > floor",
      "a module whose coverage equals --min-coverage exactly (e.g. 90 % with the default) is "
      "reported `partial` instead of `applied`"),
    M("U05", "pgle/verdicts/collectives.py",
      "if sol_fallback and min_coverage is None:",
      "if sol_fallback or min_coverage is None:",
      "without --min-coverage, a module missing only compute is `applied` on any GPU and any jax "
      "(the SoL rule), even where XLA falls back to T-shirt sizes; with it, SoL overrides the "
      "user's threshold"),
    M("U06", "pgle/verdicts/collectives.py",
      "if jax < SOL_FALLBACK_SINCE:",
      "if jax <= SOL_FALLBACK_SINCE:",
      "jax 0.10.1 (the first release with the SoL fallback) is treated as having none: modules "
      "missing only compute go `partial` under the 0.9 default instead of `applied`"),
    M("U07", "pgle/verdicts/origin.py",
      "if threads and self.compile_threads and not threads & set(self.compile_threads):",
      "if threads and self.compile_threads and threads & set(self.compile_threads):",
      "a run whose XLA lines come from the very threads that compiled is told another process "
      "printed them: nothing counted, verdict not applied; a copied foreign log is counted"),
    M("U08", "pgle/verdicts/pgle_applied.py",
      "if statuses and all(s == Applied.APPLIED for s in statuses):",
      "if statuses and any(s == Applied.APPLIED for s in statuses):",
      "a run where one module applied the profile and others did not gets the overall verdict "
      "`applied` instead of `partial`"),
    M("U09", "pgle/verdicts/pgle_applied.py",
      "if require_applied and (status != Applied.APPLIED or coverage_unknown):",
      "if require_applied and (status != Applied.APPLIED and coverage_unknown):",
      "--require-applied no longer exits 3 on a `partial` or `not_applied` run (with known "
      "coverage), nor on an applied one whose coverage is unknown"),
    M("U10", "pgle/verdicts/require.py",
      "if missed and report.exit_code == 0:",
      "if report.exit_code == 0:",
      "--require MODULE exits 3 (not verified) even when every required module applied the "
      "profile and the summary says `applied`"),
    # -- evidence (8) ------------------------------------------------------------------------
    M("U11", "pgle/evidence/steps.py",
      "if index[k] != 0 and index[k] not in exclude",
      "if index[k] != 0 or index[k] not in exclude",
      "step 0 (compilation) and the profiled steps are counted in the step times: the median "
      "and max step time shown by run/tune/compare are inflated"),
    M("U12", "pgle/evidence/steps.py",
      "\"median_s\": ordered[mid] if n % 2 else",
      "\"median_s\": ordered[mid] if not n % 2 else",
      "the median step time is wrong for every sample: an odd count averages two neighbours, an "
      "even count takes the upper middle"),
    M("U13", "pgle/evidence/logscan.py",
      r'CHECK_MISSING = re.compile(r"^Missing (?P<n>\d+) instructions',
      r'CHECK_MISSING = re.compile(r"^Missing (?P<n>\d) instructions',
      "an accuracy-checker block `Missing 12 instructions` is not recognised: a module missing "
      "ten or more instructions looks fully covered and is reported `applied`"),
    M("U14", "pgle/evidence/log_version.py",
      "(\"using_fdo\", (0, 5, 1), None,",
      "(\"using_fdo\", (0, 5, 2), None,",
      "`pgle verify` of a jax 0.5.1 log that used fdo_profile no longer matches 0.5.1: the log "
      "is attributed to jax >= 0.5.2 (or an unknown version)"),
    M("U15", "pgle/evidence/log_version.py",
      "hi_ok = high is None or (self.high is not None and self.high <= high)",
      "hi_ok = high is None or (self.high is not None and self.high < high)",
      "a log whose inferred range ends exactly at a boundary (e.g. <= 0.4.35) is not taken as "
      "within it: verify calls an old strict-checker log's silence unknown"),
    M("U16", "pgle/evidence/log_version.py",
      "if first is not None and (low is None or first > low):",
      "if first is not None and (low is None or first < low):",
      "with several clues the log's lowest possible jax version is the loosest, not the "
      "tightest: verify describes a wide range and its silence rule is wrong"),
    M("U17", "pgle/evidence/compiles.py",
      "open_row[\"kind\"], open_row[\"cache\"] = \"cached\", \"hit\"",
      "open_row[\"kind\"], open_row[\"cache\"] = \"compiled\", \"hit\"",
      "executables loaded from jax's persistent cache are reported as compiled: compare/report "
      "say `compiled`, and `run` never says the cache served the module"),
    M("U18", "pgle/evidence/compiles.py",
      "if r.event == USE and open_row[\"cache\"] == \"off\":",
      "if r.event == USE and open_row[\"cache\"] != \"off\":",
      "a compile that used the persistent cache and missed shows cache `off` instead of `miss`"),
    # -- launch (7) --------------------------------------------------------------------------
    M("U19", "pgle/launch/step_rule.py",
      "if (f.get(\"executions\") or 0) >= min_executions]",
      "if (f.get(\"executions\") or 0) > min_executions]",
      "a step function run exactly 3 times is no candidate: no step is found for short runs, "
      "and the report's step module is missing"),
    M("U20", "pgle/launch/step_rule.py",
      "if all(f.get(\"work_known\") for f in ranked):",
      "if any(f.get(\"work_known\") for f in ranked):",
      "when only some candidates' completion was seen, ranking by work gives 0 to the others: "
      "an eval function can be picked as the step over the real train step"),
    M("U21", "pgle/launch/step_rule.py",
      "_SANITIZE = re.compile(r\"[^\\w.-]\")",
      "_SANITIZE = re.compile(r\"[^\\w-]\")",
      "a step function with a dot in its name maps to the wrong XLA module name "
      "(`jit_a_b` instead of `jit_a.b`): no step module, no compile time for it"),
    M("U22", "pgle/launch/execution.py",
      "final.exit_code if final.exit_code != 0 else self.result.exit_code",
      "final.exit_code if final.exit_code == 0 else self.result.exit_code",
      "a held workload that fails after resuming is reported with its earlier exit code 0: "
      "pgle exits 0 for a failed workload"),
    M("U23", "pgle/launch/execution.py",
      "if mine is None or mine.raw != flag.raw:",
      "if mine is None and mine.raw != flag.raw:",
      "pgle's own XLA flags are never checked to reach XLA (or it crashes on a flag the user "
      "also set): a script that replaces XLA_FLAGS goes unnoticed"),
    M("U24", "pgle/launch/childenv.py",
      "        environ.setdefault(key, value)",
      "        environ[key] = value",
      "pgle's defaults override the variables the user set for the workload (its own values are "
      "silently replaced)"),
    M("U25", "pgle/launch/launcher.py",
      "return 128 - returncode if returncode < 0 else returncode",
      "return 128 + returncode if returncode < 0 else returncode",
      "a workload killed by a signal is reported with exit code 119/122 instead of 137/130 "
      "(128+N): wrong exit code and wrong `killed by` phrase"),
    # -- store and cache (7) -----------------------------------------------------------------
    M("U26", "pgle/store/policy.py",
      "DEFAULT = \"keep:3\"",
      "DEFAULT = \"keep:1\"",
      "a store without --policy keeps only the newest profile of a module: older ones are "
      "trimmed on every add"),
    M("U27", "pgle/store/policy.py",
      "int(m.group(2)) <= 100",
      "int(m.group(2)) < 100",
      "`--policy merge:5:p100` (the max) is refused as an unknown store policy"),
    M("U28", "pgle/cache/key_rules.py",
      "if version is not None and version < XLA_CACHES_SINCE:",
      "if version is not None and version <= XLA_CACHES_SINCE:",
      "on jax 0.4.36 the cache key is said not to hold the cache path: `prewarm --relocatable` "
      "sets nothing and the moved cache misses"),
    M("U29", "pgle/cache/key_rules.py",
      "return kernel or autotune",
      "return kernel and autotune",
      "with XLA's default caches on jax 0.4.36-0.10.x (autotune only) the key is said not to "
      "hold the path: --relocatable does not turn the XLA caches off and a moved cache misses"),
    M("U30", "pgle/store/key.py",
      "(\"device kind\", planned.device_kind, actual.device_kind),",
      "(\"device kind\", planned.device_kind, planned.device_kind),",
      "a store view made for an H100 served to a run on another GPU kind gives no warning that "
      "the profiles may not fit"),
    M("U31", "pgle/cache/entries.py",
      "for role in (manifest.ROLE_PGLE_OPTIMIZED, manifest.ROLE_FIRST_PASS, manifest.ROLE_PLAIN):",
      "for role in (manifest.ROLE_FIRST_PASS, manifest.ROLE_PGLE_OPTIMIZED, manifest.ROLE_PLAIN):",
      "`pgle cache ls` shows a module that has its PGLE-optimized entry as `first_pass`"),
    M("U32", "pgle/store/store.py",
      "if policy.merge else es[-1:]",
      "if policy.merge else es[:1]",
      "a store with several profiles of a module serves the oldest one, not the newest"),
    # -- shared_folders and redact (5) -------------------------------------------------------
    M("U33", "pgle/shared_folders.py",
      "if limit is not None and st.st_size > limit:",
      "if limit is not None and st.st_size >= limit:",
      "a file exactly at pgle's size limit (metadata, spec) is refused as too large"),
    M("U34", "pgle/shared_folders.py",
      "return file_mode() & stat.S_IMODE(source_mode)",
      "return file_mode() | stat.S_IMODE(source_mode)",
      "a copied profile gets wider permissions than its source (e.g. group/world readable or "
      "executable) instead of never wider"),
    M("U35", "pgle/redact.py",
      "if hide_next and not arg.startswith(\"--\"):",
      "if hide_next and not arg.startswith(\"-\"):",
      "`--password -s3cr3t` as two arguments: the secret starting with `-` is written in clear "
      "to spec.json, manifests and reports"),
    M("U36", "pgle/redact.py",
      "return any(word in upper for word in _ENV_WORDS)",
      "return any(word in name for word in _ENV_WORDS)",
      "a lower- or mixed-case secret variable (`hf_token`, `Api_Key`) is recorded with its "
      "value in clear",
      equivalent="secret_variable is only reached with names _ENV_NAME matched (upper case, "
      "digits, underscores), which upper() leaves as they are; a lower-case hf_token=x is "
      "read as an option and redacted by its words (as heldout2's G34)"),
    M("U37", "pgle/redact.py",
      r"""[^\s'\"@]+(?=@)""",
      r"""[^\s'\"@/]+(?=@)""",
      "a URL password holding `/` (an AWS secret key in s3://AKIA...:abc/def@host) is written "
      "in clear"),
    # -- jobs (5) ----------------------------------------------------------------------------
    M("U38", "pgle/jobs/ranks.py",
      "return self.world_size > 1",
      "return self.world_size >= 1",
      "a single process is treated as a multi-rank job: it is asked for --job-dir / a rank "
      "placeholder, or writes job folders it does not need"),
    M("U39", "pgle/jobs/ranks.py",
      "if not 0 <= info.rank < info.world_size:",
      "if not 0 <= info.rank <= info.world_size:",
      "PGLE_RANK=4 with PGLE_WORLD_SIZE=4 is accepted instead of refused: the job waits "
      "forever for a rank 3 that is counted twice or never comes"),
    M("U40", "pgle/jobs/layout.py",
      "if max(request.selected_ranks) >= info.world_size:",
      "if max(request.selected_ranks) > info.world_size:",
      "selecting rank N in a job of N ranks is not refused: the selection names a rank that "
      "does not exist and nothing is collected"),
    M("U41", "pgle/jobs/divergence.py",
      "return {\"line\": n + 1,",
      "return {\"line\": n,",
      "the report of ranks compiling different programs names the line before the first "
      "differing HLO line (0 for the first)"),
    M("U42", "pgle/jobs/first_stopped.py",
      "candidates = [r for r in ranks if r not in waiting]",
      "candidates = [r for r in ranks if r in waiting]",
      "a stalled job blames a rank that waits in a collective for its peers instead of the rank "
      "that stopped first"),
    # -- commands (8) ------------------------------------------------------------------------
    M("U43", "pgle/commands/arms.py",
      "if len(before) < MIN_STEPS or len(after) < MIN_STEPS:",
      "if len(before) < MIN_STEPS and len(after) < MIN_STEPS:",
      "tune prints a step-time ratio from too few steps on one side (e.g. 2 runs vs 50) "
      "instead of 'no step-time ratio'"),
    M("U44", "pgle/commands/arms.py",
      "O1_SINCE = (0, 6, 2)",
      "O1_SINCE = (0, 6, 3)",
      "`tune --compare o1` is refused on jax 0.6.2, which has JAX_OPTIMIZATION_LEVEL"),
    M("U45", "pgle/commands/compare.py",
      "arms.ratio(base_times, sample[row[\"arm\"]])",
      "arms.ratio(sample[row[\"arm\"]], base_times)",
      "`tune --compare` reports every arm's ratio inverted: a faster arm shows > 1 (slower)"),
    M("U46", "pgle/commands/tune.py",
      "(self.gpu or self.status != \"empty\")",
      "(self.gpu and self.status != \"empty\")",
      "off a GPU a collect phase that failed to produce any profile is not a failure: tune goes "
      "on and exits 0"),
    M("U47", "pgle/commands/run.py",
      "loaded_from_cache=[r[\"module\"] for r in made if r[\"kind\"] == \"cached\"]",
      "loaded_from_cache=[r[\"module\"] for r in made if r[\"kind\"] == \"compiled\"]",
      "`pgle run` blames jax's compilation cache for modules it compiled, and misses the ones "
      "the cache served (the 'rerun with the cache off' advice goes wrong)"),
    M("U48", "pgle/commands/collect.py",
      "if sep and int(lvl.strip()) >= level:",
      "if sep and int(lvl.strip()) > level:",
      "a user's TF_CPP_VMODULE=gpu_hlo_schedule=1 is rewritten by collect (it is already "
      "enough); a higher level is kept but an equal one is replaced"),
    M("U49", "pgle/commands/prewarm.py",
      "r in done[-KEEP_RUNS:]",
      "r in done[:KEEP_RUNS]",
      "after 20 prewarm runs the manifest keeps the oldest finished runs and drops the newest"),
    M("U50", "pgle/commands/report.py",
      "elif r[\"beyond_noise\"] and r[\"ratio\"] < 1:",
      "elif r[\"beyond_noise\"] and r[\"ratio\"] > 1:",
      "`pgle report` tells the user to keep a profile that makes steps slower (with a "
      "negative '% faster'), and to drop one that makes them faster"),
)
