"""Mutation testing: apply each deliberate bug of tests/mutants/mutants.py, one at a time, to a
private copy of the checkout, run the tests of its area, and count the bugs the tests catch.

    python3 tests/mutants/run.py                 # every mutant; exit 1 below --min (0.90)
    python3 tests/mutants/run.py --only M07 M12  # some
    python3 tests/mutants/run.py --list          # what each mutant breaks

The copy gets its own virtual environment (system site-packages plus an editable install of the
copy), so the tests' subprocesses (`python -m pgle`) run the mutated code, not this checkout's.
Before any mutant, each area's tests must pass unmutated (else the kill rate means nothing).
A mutant whose text is no longer in its file is reported STALE and fails the run: the list is
kept in step with the code, never silently shrunk. Results: tests/mutants/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

from mutants import AREAS, MUTANTS, Mutant  # noqa: E402


def checkout_copy(dest: Path) -> None:
    """Tracked and untracked-but-not-ignored files: what the tests see in a clean clone."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    subprocess.run(["git", "init", "-q", str(dest)], check=True)


def make_venv(copy: Path) -> Path:
    venv = copy / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    # Run from a venv, `venv --system-site-packages` reaches the *base* interpreter's
    # site-packages, not this venv's (where jax may be): hand the copy ours by a .pth file.
    site_dir = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              check=True, capture_output=True, text=True).stdout.strip()
    ours = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
    Path(site_dir, "pgle-mutants-parent.pth").write_text("".join(p + "\n" for p in ours))
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "-e", str(copy)],
                   check=True, cwd=copy)
    return py


def run_tests(py: Path, copy: Path, tests: list[str], timeout: float) -> tuple[int, float, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS",)}
    t0 = time.monotonic()
    try:
        proc = subprocess.run([str(py), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                               *tests], cwd=copy, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
        rc, tail = proc.returncode, (proc.stdout + proc.stderr)[-1500:]
    except subprocess.TimeoutExpired:
        rc, tail = -1, "timed out"
    return rc, time.monotonic() - t0, tail


def apply(copy: Path, m: Mutant) -> str | None:
    """The file's original text, or None when the mutant's text is not there exactly once."""
    path = copy / m.file
    text = path.read_text()
    if text.count(m.old) != 1:
        return None
    mutated = text.replace(m.old, m.new)
    compile(mutated, str(path), "exec")  # a mutant must be valid Python: a bug, not a typo
    path.write_text(mutated)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="mutant ids")
    ap.add_argument("--min", type=float, default=0.90, help="kill rate below which to exit 1")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds per test run")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "results.json")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.id in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.id}  {m.area:10} {m.file}: {m.why}")
        return 0
    t_start = time.monotonic()
    ids = [m.id for m in MUTANTS]
    assert len(ids) == len(set(ids)), "duplicate mutant ids"
    with tempfile.TemporaryDirectory(prefix="pgle-mutants-") as tmp:
        copy = Path(tmp) / "repo"
        checkout_copy(copy)
        py = make_venv(copy)
        for area in sorted({m.area for m in chosen}):
            # The area's tests and every test its mutants name: a test failing unmutated would
            # count its mutant as killed.
            named = [t for m in chosen if m.area == area for t in m.tests]
            tests = list(dict.fromkeys(AREAS[area] + named))
            rc, secs, tail = run_tests(py, copy, tests, args.timeout)
            print(f"baseline {area}: {'ok' if rc == 0 else 'FAILED'} ({secs:.0f} s)", flush=True)
            if rc != 0:
                print(tail)
                return 2
        results: list[dict[str, object]] = []
        for m in chosen:
            original = apply(copy, m)
            if original is None:
                results.append({"id": m.id, "area": m.area, "outcome": "stale", "why": m.why})
                print(f"{m.id}: STALE ({m.file} no longer holds its text exactly once)", flush=True)
                continue
            try:
                rc, secs, tail = run_tests(py, copy, m.tests or AREAS[m.area], args.timeout)
            finally:
                (copy / m.file).write_text(original)
            outcome = "killed" if rc != 0 else "survived"
            results.append({"id": m.id, "area": m.area, "outcome": outcome, "seconds": round(secs),
                            "why": m.why})
            print(f"{m.id}: {outcome} ({secs:.0f} s) {m.why}", flush=True)
    killed = sum(r["outcome"] == "killed" for r in results)
    stale = sum(r["outcome"] == "stale" for r in results)
    rate = killed / len(results) if results else 0.0
    total = round(time.monotonic() - t_start)
    args.out.write_text(json.dumps({"kill_rate": rate, "killed": killed, "mutants_run": len(results),
                                    "total_seconds": total, "cpus": os.cpu_count(),
                                    "mutants": results}, indent=1) + "\n")
    print(f"kill rate {killed}/{len(results)} = {rate:.0%} ({stale} stale) in {total} s; "
          f"results in {args.out}")
    return 0 if rate >= args.min and not stale else 1


if __name__ == "__main__":
    sys.exit(main())
