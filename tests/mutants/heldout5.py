"""A fifth held-out list (issue 37): 34 realistic one-line bugs written from the product code
alone, blind to the project's own list (tests/mutants/mutants.py), to the earlier held-out lists
(heldout.py .. heldout4.py), to tests/mutants/independent.py's MUTANTS, to every result of
theirs and to the tests. Each `why` is what a user would see go wrong. Run by the same runner:

    python3 tests/mutants/independent.py --set heldout5 --check   # each applies, nothing runs
    python3 tests/mutants/independent.py --set heldout5 --write   # the round

Its one module: pgle/launch/harness.py, the code that runs inside the workload's process, never
in a held-out list before (30): the profiling window 8 (steps, auto, time, executions and the
rule's `_choose`, the size probe), step counting 3, events 3, the completion watcher 6 (spans,
tainting by compiles, donation, held executions), the light path 3, marked steps' completions
2, the jit_functions record 4, the compile hand-over 1; plus pgle/launch/handoff.py 3 and
pgle/launch/jax_internals.py 1.
"""

from __future__ import annotations

from mutant import Mutant

H = "pgle/launch/harness.py"
M = Mutant
MUTANTS: tuple[Mutant, ...] = (
    # -- the profiling window (8) ----------------------------------------------------------------
    M("T01", H,
      "self.steps_in_trace = index - self.first_step_in_trace + 1",
      "self.steps_in_trace = index - self.first_step_in_trace",
      "`pgle collect --steps 3:2` profiles steps 3..5 (one step more than asked) and its "
      "trace_stop says the trace holds 2 steps"),
    M("T02", H,
      "AUTO_STEPS = (2, 5)",
      "AUTO_STEPS = (2, 4)",
      "the default window of a script that marks steps profiles steps 2..5, not 2..6 as the "
      "docs and `collect` say"),
    M("T03", H,
      "return bool(self.max_seconds) and self.calls.clock() - self.started_at >= self.max_seconds",
      "return self.calls.clock() - self.started_at >= self.max_seconds",
      "with no --trace-max-seconds bound (0) the auto window stops after its first step or "
      "execution, 'cut short by the 0 s bound'",
      equivalent="no such option: every spec pgle writes has max_seconds = AUTO_MAX_SECONDS "
      "(30 s, pgle/commands/options.py), and without a spec no window opens, so "
      "`bool(self.max_seconds)` is true wherever _over_time runs (its first-run kill was a "
      "step-timing test failing under load; rerun alone, the area passed)"),
    M("T04", H,
      "if self.pending is None and n > self.warmup:",
      "if self.pending is None and n >= self.warmup:",
      "the execution window opens one execution early: the last warm-up execution (with "
      "--warmup 1, the compiling one) is profiled"),
    M("T05", H,
      "if self.executions_in_trace >= self.max_executions:",
      "if self.executions_in_trace > self.max_executions:",
      "the execution window profiles one execution more than --executions asks for"),
    M("T06", H,
      "        if step_rule.by_work(reached, min_executions=2):",
      "        if not step_rule.by_work(reached, min_executions=2):",
      "once every candidate's work is known the window still waits DECIDE_ASKS calls before "
      "opening; while some is unknown it picks by host time at once (a helper wins: #33)"),
    M("T07", H,
      "wait = self.calls.origin + delay - self.calls.clock()",
      "wait = delay",
      "--delay D counts from the backend's start, not the process start: the time window "
      "opens late by the import and first compile"),
    M("T08", H,
      "self.count = max(1, min(self.count, self.max_bytes // size))",
      "self.count = max(0, min(self.count, self.max_bytes // size))",
      "--trace-max-bytes smaller than one step's trace: the window holds 0 steps and nothing is "
      "profiled, instead of one step"),
    # -- step counting (3) -----------------------------------------------------------------------
    M("T09", H,
      "harness.step_index = index + 1",
      "harness.step_index = index",
      "a script that marks one step is reported as marking none; 'never opened: the workload "
      "marked only N steps' counts one step too few"),
    M("T10", H,
      "if step_name and name != step_name:",
      "if step_name and name == step_name:",
      "--step-name train counts every step but the ones named train (eval markers become "
      "the steps)"),
    M("T11", H,
      "        row[0] += 1  # no lock: a count (the GIL keeps it whole but for racing threads)\n",
      "",
      "after 20 marked steps the step function's executions stop counting: jit_functions "
      "and the module rows show ~20 executions for a 1000-step run"),
    # -- events (3) ------------------------------------------------------------------------------
    M("T12", H,
      "edges = self._base + len(self._steps) // STEP_FIELDS",
      "edges = len(self._steps) // STEP_FIELDS",
      "after the first write-out every event's place among the step edges goes back to 0: "
      "compiles and warnings are read as happening before step 0"),
    M("T13", H,
      "        self._through = True\n",
      "        self._through = False\n",
      "a process the workload forks buffers its events with no flusher thread: its lines "
      "(and steps) never reach the events file"),
    M("T14", H,
      "            del steps[:n]  # edges added meanwhile stay, for the next flush\n",
      "",
      "each write-out writes every step edge again: steps.bin holds each step many times over "
      "and the step times are garbage"),
    # -- the completion watcher (6) ---------------------------------------------------------------
    M("T15", H,
      "/ sum(e[3] for e in span)",
      "/ len(span)",
      "a span carrying held executions shares its time by entries, not executions: a fast "
      "loop's per-execution work is inflated k-fold and the step times are wrong"),
    M("T16", H,
      "max(last_done, span[0][1])",
      "last_done",
      "the device's idle time before a span (the host loading data, sleeping) counts as "
      "work: a function called after a pause outranks the real step"),
    M("T17", H,
      "        for x in reversed(out):  # `return state, loss`",
      "        for x in out:  # `return state, loss`",
      "the watcher waits on the returned state, which the next call donates: every completion "
      "of a donating train step is unknown, and the step is picked by host time"),
    M("T18", H,
      "        if self.held:\n            self._flush()\n        reached = threading.Event()",
      "        reached = threading.Event()",
      "the window's choice is asked while the executions held by the watcher are not handed "
      "over: their work is still unknown and the rule falls back to host time"),
    M("T19", H,
      "if n == 1 or c != compiles:",
      "if n == 1 and c != compiles:",
      "a recompile mid-run (a new input shape) no longer taints its span: the compile's "
      "seconds count as the executions' work and can make a helper the step"),
    M("T20", H,
      "agg[0] += seconds * k",
      "agg[0] += seconds",
      "executions that rode along in a span add their count but not their work: a fast "
      "loop's step function is ranked below a helper that is waited on every call"),
    # -- the light path (3) ----------------------------------------------------------------------
    M("T21", H,
      "_EXECUTIONS[0] += n - light.beacon",
      "_EXECUTIONS[0] += 1",
      "once the step function goes light the progress beacon counts one execution a sample: "
      "the stall watchdog sees a healthy fast loop crawl"),
    M("T22", H,
      "light.tail[0] = None\n        gap = n - 1 - light.sent if light.sent else 0",
      "light.tail[0] = None\n        gap = n - light.sent if light.sent else 0",
      "each sample's span counts one execution too many: a light loop's step time comes out "
      "short by one execution in k"),
    M("T23", H,
      "out = tail[0] = self._pgle[0](*args, **kwargs)",
      "out = self._pgle[0](*args, **kwargs)",
      "a light loop's unsampled executions are never handed over before another function "
      "runs: an eval called between samples absorbs their work and can become 'the step'"),
    # -- marked steps' completions (2) -----------------------------------------------------------
    M("T24", H,
      "if watcher.busy or not self.keeps_up:",
      "if watcher.busy and not self.keeps_up:",
      "a marked loop whose device is behind has most of its steps skipped (no completion): "
      "its step times are shared over long spans"),
    M("T25", H,
      "                        if ready:\n                            rows(done_row(",
      "                        if ready is not None:\n                            rows(done_row(",
      "a marked step whose work is still on the device is timed at its marker's end: the "
      "step times show how fast the host enqueues, not the device's throughput"),
    # -- the jit_functions record (4) ------------------------------------------------------------
    M("T26", H,
      'key=lambda f: (-step_rule.weight(f), -f["seconds"], -f["executions"])',
      'key=lambda f: (step_rule.weight(f), -f["seconds"], -f["executions"])',
      "jit_functions lists the least busy functions first: with more than 20 functions the "
      "step and its module drop out of the module lists"),
    M("T27", H,
      "self.watcher.finish(WATCH_DRAIN_S)",
      "self.watcher.finish(0.0)",
      "at exit the last executions' completions are not waited for: a short run's step has "
      "no known work and jit_functions' work rows miss the last steps"),
    M("T28", H,
      "for t, w, d, n, c, k in work",
      "for t, w, d, c, n, k in work",
      "the work rows swap execution number and compile count: step times from completions "
      "are computed over the wrong executions"),
    M("T29", H,
      "if last is not None and last[2] > 1 and last[4] == counted:",
      "if last is not None and last[2] > 0 and last[4] == counted:",
      "a function's first execution (tracing, compile) counts as host time: an eval compiled "
      "once outranks the step where no completion is known"),
    # -- the compile hand-over (1) ---------------------------------------------------------------
    M("T30", H,
      "if (self.stats.get(name) or [0])[0] <= 1:",
      "if (self.stats.get(name) or [0])[0] < 1:",
      "the module XLA compiled for a function is never recorded: jax.pmap's step is listed as "
      "pmap_f's module, which no profile names (jit__fun)"),
    # -- the hand-off (pgle/launch/handoff.py, 3) ------------------------------------------------
    M("T31", "pgle/launch/handoff.py",
      "            n += 1\n            deadline = time.monotonic() + timeout_s\n",
      "            n += 1\n",
      "a `--gather kv` job's later hand-off rounds share the first round's deadline: a "
      "second round after a slow first one gives up with 'pgle asked nothing'"),
    M("T32", "pgle/launch/handoff.py",
      '            if request["final"]:\n                break\n',
      "",
      "after the final round a held rank waits for a request that never comes: every "
      "`--gather kv` job ends hold_timeout_s late, with a 'released' error"),
    M("T33", "pgle/launch/handoff.py",
      "        fetched[key] = to\n",
      "",
      "fetched values are written but not reported: pgle says rank 0 never got the other "
      "ranks' reports"),
    # -- jax_internals (1) -----------------------------------------------------------------------
    M("T34", "pgle/launch/jax_internals.py",
      'return base.__mro__[1].__init__, {"_r": 1}',
      "return base.__mro__[1].__init__, {}",
      "pgle's step marker drops jax's `_r=1`: the profiler no longer records the marked steps "
      "as step roots, so the trace's steps are not found"),
)
