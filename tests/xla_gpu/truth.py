"""What really happened in each lane scenario, from its scenarios.json (XLA's full log, the
child's exit status, the schedules, the names of the compiled modules' instructions) and its
trimmed log (the accuracy checker's missing names), in the terms of a pgle verdict.

The rule is pgle's (docs/reference/verdicts.md), applied to what the compile really did:
- a module whose profile misses a collective it runs is `partial`, whatever its coverage
  (issue 22); where XLA prices unprofiled compute with its SoL model (jax >= 0.10.1 on the
  lane's H100) missing compute does not make it partial, elsewhere coverage >= 90% decides;
- an async collective start the checker lists that the compiled module does not run under
  that name (jax >= 0.11.1 turns a pair nothing overlaps into a new synchronous instruction
  after scheduling, e.g. `all-reduce-start` -> `all-reduce.6`) is in no profile of any run
  and is not counted, in the coverage either (fact `converted=`), as read from the compile's
  own HLO names (scenarios.json `modules` + each scenario's names delta).
`log_view` is the same truth as a judge holding only the log can see it: on a jax that renames,
a missing async start the log does not show XLA's pass looking at (its VLOG 3 lines `Found
async start %start` and, for a pair it converts, `Added pair: {start, ...`) is `unresolved=`,
converted or not, and such a module `partial`.

Stdlib only: used by tests/evidence/test_xla_gpu_fixtures.py and tests/xla_gpu/compare_verdicts.py.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data" / "xla_gpu"
CLONE = "-clone"
# Scenarios whose profile was unreadable: the truth is `error` when XLA said so in the log.
UNREADABLE = {"absent", "garbage-pbtxt", "garbage-pb", "fdo-garbage", "gzip-pb"}
# jax 0.4.36-0.5.0: the WARN checker prints nothing even when instructions are missing (the
# ERROR reruns of the same profiles fail the compile: partial-error, fp-other-error).
WARN_PRINTS_SINCE = (0, 5, 1)
MIN_COVERAGE = 0.9  # pgle's default --min-coverage
# XLA prices instructions a profile lacks with its SoL model from jax 0.10.1 (PR #41660) on
# Hopper (the lane's H100): missing compute then never makes a module partial.
SOL_SINCE = (0, 10, 1)
# jax 0.11.0 keeps the names of a pair it makes synchronous after scheduling; 0.11.1 renames.
RENAMED_SINCE = (0, 11, 1)
# What XLA's opcodes name collectives and host copies (the lane's modules are named so; jax
# >= 0.8 names send/recv after the primitive: psend.10, precv.10).
COMM = re.compile(r"^(?:all-reduce|all-gather|reduce-scatter|all-to-all|ragged-all-to-all"
                  r"|collective-permute|collective-broadcast|p?send|p?recv|copy-start|copy-done"
                  r"|ppermute|psum)(?:-start|-done)?(?:[.\-]\d+)*$")
# jax >= 0.11 compiles program a's psum as an async Triton collective fusion (fusion-start/-done,
# `fusion_backend_config.kind = "__triton_collective"` in the compile's HLO, issue 32): a
# collective; the log alone names it without its kind (fact `unknown=`). In the lane's programs
# it is the unnumbered `fusion-start`/`fusion-done` (the compile's HLO on jax 0.12.0.1: programs
# a, b, c, d_eval, f); c's and f's `fusion-start.1`/`.2` are async fusions of another kind
# (no backend kind): compute, which the log cannot tell either.
TRITON_SINCE = (0, 11)
ASYNC_FUSION = re.compile(r"^fusion-(?:start|done)(?:[.\-]\d+)*$")
TRITON_FUSION = re.compile(r"^fusion-(?:start|done)$")
ASYNC_START = re.compile(r"^(?:all-reduce|all-gather|reduce-scatter|all-to-all"
                         r"|collective-permute|collective-broadcast)-start(?:[.\-]\d+)*$")
# A log line: optional `srun --label` rank, the tsl or absl prefix (thread id where there is
# one), the source file, the message.
_LINE = re.compile(
    r"^(?:(?P<rank>\d+): )?(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF](?:\s+(?P<t1>\d+))? "
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+(?P<t2>\d+) )\S*?(?P<file>[\w.]+\.cc):\d+\] (?P<msg>.*)$")


def versions(data: Path = DATA) -> list[str]:
    return sorted((p.name for p in data.iterdir() if (p / "scenarios.json").is_file()),
                  key=lambda s: tuple(int(x) for x in s.split(".")))


def load(version: str, data: Path = DATA) -> dict:
    return json.loads((data / version / "scenarios.json").read_text())


def truth(name: str, sc: dict, doc: dict, log_text: str | None = None) -> tuple[str, dict]:
    """(overall status, {module: fact}) of one scenario; facts: 'full' | 'k/n[ converted=a,b]
    [ collectives=c,d]' (the checker's found/total; the async starts the module does not run
    under that name; the collectives it runs that the profile lacks; in `log_view`,
    `unknown=` the Triton collective fusions a log names without their kind) | 'not read' | 'read (no
    checker)' | 'read (checker silent)' | 'failed' | 'failed (not PGLE)'. `-clone` modules
    keep their own entries. `log_text`: the scenario's log (default: read from DATA)."""
    return _truth(name, sc, doc, log_text, as_log_shows=False)


def log_view(name: str, sc: dict, doc: dict, log_text: str | None = None) -> tuple[str, dict]:
    """The truth as the log alone shows it: on a jax that renames, a missing async start
    without the pass's VLOG lines in the module's log is 'unresolved=' (pgle verify cannot
    tell a converted collective from a missing one)."""
    return _truth(name, sc, doc, log_text, as_log_shows=True)


def _truth(name: str, sc: dict, doc: dict, log_text: str | None, *,
           as_log_shows: bool) -> tuple[str, dict]:
    f = sc["facts"]
    if f.get("truth_same_as"):
        ref = doc["scenarios"][f["truth_same_as"]]
        st, mods = _truth(f["truth_same_as"], ref, doc, None, as_log_shows=as_log_shows)
        return st + f" (log hides it; same run as {f['truth_same_as']})", mods
    if f["process_aborted"]:
        return "error (XLA aborted before compiling)", {}
    v = version_tuple(doc["jax"])
    strict = "PGLE_STRICTNESS_LEVEL_ERROR" in sc["xla_flags"] or \
        "--xla_gpu_enable_pgle_accuracy_checker=true" in sc["xla_flags"]
    if not doc["quirks"]["has_xla_gpu_pgle_accuracy_checker"]:
        silent = "full" if strict else "read (no checker)"
    else:
        silent = "full" if strict or v >= WARN_PRINTS_SINCE else "read (checker silent)"
    if log_text is None:
        path = DATA / doc["jax"] / f"{name}.log"
        log_text = path.read_text() if path.is_file() else ""
    blocks, pairs = read_blocks(log_text)
    used: set[int] = set()
    mods: dict = {}
    for m in f["log_per_module"]:
        # Every entry with a block takes its block, in log order (candidates' too).
        missing = _block_names(blocks, used, m) if m.get("checker_missing") is not None else []
        if m.get("sub_compile") and not (m.get("module") or "").endswith(CLONE):
            continue  # an autotuner candidate (jax >= 0.11): not the workload's module
        mod = m.get("module") or "?"
        if m.get("rank") is not None:
            mod = (mod, m["rank"])
        if not (m.get("using") or m.get("found_profile")):
            mods[mod] = "not read"
        elif m.get("checker_missing") is not None:
            found = m.get("checker_found", 0)
            names = executed_names(doc, sc, m)
            converted, comm, unresolved, unknown = [], [], [], []
            seen = pairs.get(_key(m), {}).get(m.get("module"), {})
            for n in missing:
                if as_log_shows and ASYNC_START.match(n) and v >= RENAMED_SINCE \
                        and n not in seen.get("pair", ()) and n not in seen.get("seen", ()):
                    unresolved.append(n)  # the log cannot tell converted from missing
                elif ASYNC_START.match(n) and names is not None and n not in names:
                    converted.append(n)
                elif ASYNC_FUSION.match(n) and v >= TRITON_SINCE:
                    if as_log_shows:
                        unknown.append(n)
                    elif TRITON_FUSION.match(n):
                        comm.append(n)
                elif COMM.match(n):
                    comm.append(n)
            fact = f"{found}/{found + m['checker_missing']}"
            fact += f" converted={','.join(converted)}" if converted else ""
            fact += f" unresolved={','.join(unresolved)}" if unresolved else ""
            fact += f" unknown={','.join(unknown)}" if unknown else ""
            fact += f" collectives={','.join(comm)}" if comm else ""
            mods[mod] = fact
        else:
            mods[mod] = silent
    if f["compile_failed"]:
        fm = f["failed_modules"]
        for m in fm:  # the compile failed: "failed" where XLA discarded the profile
            if m.get("module") in mods:
                mods[m["module"]] = "failed" if "Discarding the profile" in (m.get("error") or "") \
                    else "failed (not PGLE)"
        err = (fm[0]["error"] if fm else "") or ""
        return f"error (compile failed: {err[:90]})", mods
    main = {k: v for k, v in mods.items() if not _name(k).endswith(CLONE)}
    if name in UNREADABLE:
        return ("error" if f["log_error_lines"] else "not_applied (XLA silent)"), mods
    if not main or all(v == "not read" for v in main.values()):
        return "not_applied", mods
    sol = v >= SOL_SINCE

    def fits(v: str) -> bool:  # pgle's rule (see the module's doc)
        if "/" not in v:
            return v in ("full", "read (no checker)", "read (checker silent)")
        fact = parse_fact(v)
        if fact["collectives"] or fact["unresolved"] or fact["unknown"] or fact["found"] == 0:
            return False
        compute = fact["total"] - fact["found"] - len(fact["converted"])
        return compute <= 0 or sol or fact["found"] >= MIN_COVERAGE * (fact["found"] + compute)
    if all(fits(v) for v in main.values()):
        return "applied", mods
    if all(v == "not read" or v.startswith("0/") for v in main.values()):
        return "not_applied (read, 0 covered)", mods
    return "partial", mods


def parse_fact(fact: str) -> dict:
    """'k/n converted=a unresolved=b collectives=c,d' -> its parts ({} lists where absent)."""
    head, *rest = fact.split(" ")
    found, total = map(int, head.split("/"))
    out: dict = {"found": found, "total": total, "converted": [], "unresolved": [],
                 "collectives": [], "unknown": []}
    for part in rest:
        key, _, names = part.partition("=")
        out[key] = names.split(",")
    return out


def coverage(fact: dict) -> float | None:
    """The coverage pgle reports for a checker fact: found over what a profile can hold
    (the converted collectives left out)."""
    total = fact["total"] - len(fact["converted"])
    return fact["found"] / total if total else None


def _key(m: dict) -> tuple:
    return (m.get("rank"), str(m["thread"]) if m.get("thread") is not None else None)


def read_blocks(text: str) -> tuple[list[dict], dict]:
    """The accuracy checker's blocks ({key, missing, names}) in log order, and per (rank,
    thread), per module (the thread's newest `Fingerprint before LHS` module when the line
    came), the async starts XLA's convert_async_collectives_to_sync pass looked at ("seen":
    `Found async start %S`) and made synchronous ("pair": `Added pair: {S, D`)."""
    blocks: list[dict] = []
    pairs: dict = {}
    newest: dict = {}
    open_block: dict = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        key = (int(m.group("rank")) if m.group("rank") else None, m.group("t1") or m.group("t2"))
        msg = m.group("msg")
        b = open_block.get(key)
        if b is not None and msg.startswith("  ") and len(b["names"]) < b["missing"]:
            b["names"].append(msg.strip())
            continue
        if mm := re.match(r"Missing (\d+) instructions from the profile\.", msg):
            open_block[key] = {"key": key, "missing": int(mm.group(1)), "names": []}
            blocks.append(open_block[key])
        elif mm := re.match(r"Fingerprint before LHS for module (\S+?)(?:\(\d+\))? = ", msg):
            newest[key] = mm.group(1)
        elif mm := re.match(r"Added pair: \{([^,\s]+),", msg):
            pairs.setdefault(key, {}).setdefault(newest.get(key), {}).setdefault(
                "pair", set()).add(mm.group(1))
        elif mm := re.match(r"Found async start %?([\w.\-]+) = ", msg):
            pairs.setdefault(key, {}).setdefault(newest.get(key), {}).setdefault(
                "seen", set()).add(mm.group(1))
    return blocks, pairs


def _block_names(blocks: list[dict], used: set[int], m: dict) -> list[str]:
    """The missing names of the checker block of log_per_module entry `m`: the first unused
    block of its rank and thread (any, where the log has no thread ids) with its count."""
    key = _key(m)
    for i, b in enumerate(blocks):
        if i in used or b["missing"] != m["checker_missing"]:
            continue
        if key[1] is not None and b["key"] != key:
            continue
        used.add(i)
        return b["names"]
    return []


def executed_names(doc: dict, sc: dict, m: dict) -> set[str] | None:
    """The instruction names of the module of log entry `m` as this scenario compiled it: the
    no-profile compile's (entry, while bodies and conditions), changed by the scenario's own
    delta (`names_not_in_no_profile_run` / `names_gone_since_no_profile_run`). None where the
    scenario's compile of it is unknown or failed."""
    name = m.get("module")
    base = next((b for b in doc["modules"] if b["module"] == name), None)
    same = [x for x in sc.get("modules") or [] if x.get("module") == name]
    mine = next((x for x in same if m.get("fingerprint")
                 and x.get("fingerprint_before_lhs") == m.get("fingerprint")), None)
    if mine is None and len(same) == 1:
        mine = same[0]
    if base is None or mine is None or mine.get("compile_failed"):
        return None
    names = set(base.get("entry_instructions") or [])
    for group in ("while_bodies", "while_conditions"):
        for body in (base.get(group) or {}).values():
            names |= set(body)
    names |= set(mine.get("names_not_in_no_profile_run") or [])
    names -= set(mine.get("names_gone_since_no_profile_run") or [])
    return names


def _name(key) -> str:
    return key[0] if isinstance(key, tuple) else key


def per_module(mods: dict) -> dict:
    """Each module's truth as a verdict sees it: the module's own entry, or its clone's where
    XLA stopped before scheduling the module itself (ERROR strictness on jax 0.7.2/0.8.3).
    Keys: the module name, or (name, rank) in a multi-rank log."""
    out = {k: v for k, v in mods.items() if not _name(k).endswith(CLONE)}
    for k, v in mods.items():
        if _name(k).endswith(CLONE):
            base = _name(k)[: -len(CLONE)]
            out.setdefault((base, k[1]) if isinstance(k, tuple) else base, v)
    return out


def expected_status(version: str, name: str, truth_status: str, *, profile_given: bool) -> str:
    """The status pgle must give: the truth, where the log can show it."""
    if truth_status.startswith("error"):
        return "error"
    if truth_status == "not_applied (XLA silent)":
        # jax <= 0.5.3 logs nothing for a missing file; pgle checks the file when told it.
        return "error" if profile_given else "not_applied"
    if "(log hides it" in truth_status:
        if name == "no-log-level":
            return "hidden"  # error when WARNING lines show, else not_applied (empty log)
        return truth_status.split(" ")[0]
    return truth_status.split(" ")[0]


def good_profile_text(doc: dict) -> str:
    """The good text profile's complete lines (scenarios.json keeps it abridged)."""
    text = doc["profiles"]["good.pbtxt"]
    return "".join(line + "\n" for line in text.splitlines() if line.rstrip().endswith("}"))


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def ranked(name: str, sc: dict) -> bool:
    return any(m.get("rank") is not None for m in sc["facts"]["log_per_module"])


def main() -> int:  # pragma: no cover - a quick look: python tests/xla_gpu/truth.py
    for v in versions():
        doc = load(v)
        for name, sc in doc["scenarios"].items():
            st, mods = truth(name, sc, doc)
            seen, _ = log_view(name, sc, doc)
            print(v, name, st, per_module(mods), *([f"log: {seen}"] if seen != st else []),
                  sep=" | ")
    return 0


if __name__ == "__main__" and os.environ.get("PYTEST_CURRENT_TEST") is None:
    raise SystemExit(main())
