"""What really happened in each lane scenario, from its scenarios.json (XLA's full log, the
child's exit status, the schedules), in the terms of a pgle verdict.

Stdlib only: used by tests/evidence/test_xla_gpu_fixtures.py, tests/xla_gpu/test_live.py and
tests/xla_gpu/compare_verdicts.py.
"""
from __future__ import annotations

import json
import os
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


def versions(data: Path = DATA) -> list[str]:
    return sorted((p.name for p in data.iterdir() if (p / "scenarios.json").is_file()),
                  key=lambda s: tuple(int(x) for x in s.split(".")))


def load(version: str, data: Path = DATA) -> dict:
    return json.loads((data / version / "scenarios.json").read_text())


def truth(name: str, sc: dict, doc: dict) -> tuple[str, dict]:
    """(overall status, {module: 'full' | 'k/n' | 'not read' | 'read (no checker)'}) of one
    scenario; `-clone` modules keep their own entries."""
    f = sc["facts"]
    if f.get("truth_same_as"):
        ref = doc["scenarios"][f["truth_same_as"]]
        st, mods = truth(f["truth_same_as"], ref, doc)
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
    mods: dict = {}
    for m in f["log_per_module"]:
        if m.get("sub_compile") and not (m.get("module") or "").endswith(CLONE):
            continue  # an autotuner candidate (jax >= 0.11): not the workload's module
        mod = m.get("module") or "?"
        if m.get("rank") is not None:
            mod = (mod, m["rank"])
        if not (m.get("using") or m.get("found_profile")):
            mods[mod] = "not read"
        elif m.get("checker_missing") is not None:
            found = m.get("checker_found", 0)
            mods[mod] = f"{found}/{found + m['checker_missing']}"
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
    def fits(v: str) -> bool:  # the verdict's default threshold: coverage >= 90%
        if "/" not in v:
            return v in ("full", "read (no checker)", "read (checker silent)")
        found, total = map(int, v.split("/"))
        return found >= MIN_COVERAGE * total
    if all(fits(v) for v in main.values()):
        return "applied", mods
    if all(v == "not read" or v.startswith("0/") for v in main.values()):
        return "not_applied (read, 0 covered)", mods
    return "partial", mods


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
            print(v, name, st, per_module(mods), sep=" | ")
    return 0


if __name__ == "__main__" and os.environ.get("PYTEST_CURRENT_TEST") is None:
    raise SystemExit(main())
