"""Mutation score per package, from mutants mutmut 3 generates from the code (issue 37).

    python3 tests/mutants/score.py --list                  # the packages and their fast tests
    python3 tests/mutants/score.py verdicts.require        # run some packages, print their scores
    python3 tests/mutants/score.py verdicts.require --check   # and exit 1 if one fell below
                                                              # tests/mutants/scores.json
    python3 tests/mutants/score.py verdicts.require --write   # and record the new figures there
                                                              # (and in docs/development.md)
    python3 tests/mutants/score.py jobs --survivors --write  # after adding tests: rerun only
                                                              # the recorded survivors
    python3 tests/mutants/score.py launch.harness --scratch DIR --sample 200 --write
                              # a package too slow to finish: its run in DIR stopped, then a
                              # seeded uniform sample of the mutants it had not judged

The packages, the files each mutates and the fast tests that judge them are in pyproject.toml
(`[tool.pgle-mutation.packages.*]`); `[tool.mutmut]` there holds mutmut's own settings. For each
package the checkout (tracked and untracked files, as a clean clone sees them) is copied to a
scratch folder, `[tool.mutmut]` there narrowed to the package's files and tests, and
`mutmut run` runs in it; the tests and their `python -m pgle` subprocesses import the mutated
copy (tests/mutants/site/mutation_setup.py, on their PYTHONPATH).

Score = killed / (mutants - equivalent). A survivor is either a missing test (write it) or an
equivalent mutant (no behaviour differs): list it with the reason in
tests/mutants/equivalent.json. `no tests` (no selected test reaches the function) and
timeouts count as survivors. The ratchet, tests/mutants/scores.json, holds each package's and
each file's last recorded score: `--check` refuses any that fell.

A package whose run cannot finish on the machine (launch.harness: a survivor runs every
end-to-end test that reaches its function, two minutes on 2 cores, and mutmut runs the mutants
with the cheapest tests first, so the rest is the slowest) is scored from a sample: `--sample N`
on a kept copy freezes the mutants it had not judged as the pool (SAMPLE_FILE, in a seeded
random order) and judges the first N of it; each `--sample N` after draws N more. The score is
then an estimate: each sampled mutant stands for pool/drawn of the pool (`estimate`).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SCORES = HERE / "scores.json"
EQUIVALENT = HERE / "equivalent.json"
MARK = ".pgle-mutation-package"  # in a --scratch copy: the package it was made for
SAMPLE_FILE = ".pgle-mutation-sample.json"  # in a --scratch copy: the pool of --sample
UNRUN = ("not checked", "check was interrupted by user")  # mutmut's statuses without a verdict
DOC = REPO / "docs" / "development.md"
TABLE_START = "<!-- mutation-scores: written by `tests/mutants/score.py --write` from tests/mutants/scores.json -->"
TABLE_END = "<!-- /mutation-scores -->"


def scores_table(ratchet: dict) -> str:
    """The table of docs/development.md, from the ratchet (the only place figures are typed)."""
    rows = ["| package | files | mutants | killed | equivalent | score | time (2 cores) | run |",
            "|---|---|---|---|---|---|---|---|"]
    for name, r in sorted(ratchet.items()):
        files = ", ".join(f"`{f}` {s:.0%}" for f, s in sorted(r["files"].items()))
        rows.append(f"| {name} | {files} | {r['mutants']} | {r['killed']} | {r['equivalent']} | "
                    f"{r['score']:.1%}{sampled(r)} | {r['seconds']} s | {r.get('date', '')} |")
    return "\n".join(rows)


def sampled(r: dict) -> str:
    """The score cell's note for a sampled run (estimate)."""
    if "sample" not in r:
        return ""
    return f" (estimate: {r['sample']['drawn']} sampled of {r['sample']['of']} not run in full)"


def write_doc_table(ratchet: dict) -> None:
    text = DOC.read_text()
    a, b = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    DOC.write_text(text[:a] + "\n" + scores_table(ratchet) + "\n" + text[b:])


def packages() -> dict[str, dict]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    return data["tool"]["pgle-mutation"]["packages"]


def checkout_files() -> list[str]:
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, check=True).stdout
    return [rel for rel in files.decode().split("\0") if rel and (REPO / rel).is_file()]


# Command mode (`pgle run -- python script.py`) puts pgle/launch/boot first on the workload's
# PYTHONPATH, so its sitecustomize runs before the site folder's, and it imports the harness
# (whose import already calls trampolined code). In the copy it first sets up the mutation run
# (tests/mutants/site/mutation_setup.py), or the stats pass's trampolines in that process would
# ask for mutmut's configuration, which only mutmut's process has, and the harness fail to start.
BOOT = "pgle/launch/boot/sitecustomize.py"
BOOT_PROLOGUE = """\
try:  # tests/mutants/score.py: the mutation run's set-up, where the site folder is on the path
    import mutation_setup  # noqa: F401
except ModuleNotFoundError:
    pass
"""


def copied_text(rel: str) -> bytes:
    """A checkout file as the copy holds it."""
    data = (REPO / rel).read_bytes()
    return BOOT_PROLOGUE.encode() + data if rel == BOOT else data


def checkout_copy(dest: Path) -> None:
    for rel in checkout_files():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        if rel == BOOT:
            (dest / rel).write_bytes(copied_text(rel))
        else:
            shutil.copy2(REPO / rel, dest / rel)


MARKERS = "not xla_gpu and not slurm"


def narrow_config(copy: Path, files: list[str], tests: list[str],
                  deselect: list[str] | tuple[str, ...] = (), markers: str = MARKERS) -> None:
    """`[tool.mutmut]` of the copy's pyproject.toml, narrowed to one package (`deselect`: test
    ids of its files left out: slow tests that reach it mostly through real processes;
    `markers`: pytest's -m, the package's own where it selects more, e.g. `commands` takes
    its `xla_gpu_inprocess` tests, which need the CUDA compiler plugin in the run's Python)."""
    text = (copy / "pyproject.toml").read_text()
    args = ["-p", "no:cacheprovider", "-q", "-m", markers]
    args += [f"--deselect={t}" for t in deselect]
    section = "[tool.mutmut]\n" + "\n".join([
        'source_paths = ["pgle/"]',
        f"only_mutate = {json.dumps(files)}",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        # The SLURM cluster's tests reach pgle only under srun (no mutant is mapped to them) and
        # fail the whole run when the shared cluster is busy or down: left out.
        f"pytest_add_cli_args = {json.dumps(args)}",
        # mutmut stops a mutant's tests after (their time + timeout_constant) x 15 s of wall
        # time and counts a "timeout", a survivor; a mutant's endless loop must instead meet
        # tests/conftest.py's MUTANT_TEST_S (60 s), which fails the test (killed), as the loop
        # would fail CI. 5 s: no mutant is stopped before 75 s (mutmut 3.8.1's default is 1 s,
        # 15 s: evidence's three endless loops were counted survivors).
        "timeout_constant = 5.0",
        "",
    ])
    text = re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[|\Z)", section, text)
    (copy / "pyproject.toml").write_text(text)


def read_statuses(copy: Path) -> dict[str, dict[str, str]]:
    """file -> mutant name -> mutmut's status (killed, survived, no tests, timeout...)."""
    from mutmut.stats import status_by_exit_code

    out: dict[str, dict[str, str]] = {}
    for meta in sorted((copy / "mutants" / "pgle").rglob("*.py.meta")):
        rel = str(meta.relative_to(copy / "mutants"))[: -len(".meta")]
        codes = json.loads(meta.read_text()).get("exit_code_by_key", {})
        if codes:
            out[rel] = {k: status_by_exit_code[v] for k, v in codes.items()}
    return out


def estimate(killed: int, counted: int, sample: dict) -> float:
    """The score a sampled run stands for: of `counted` judged (non-equivalent) mutants,
    `killed` killed; of them `sample["counted"]`, `sample["killed"]` killed, were drawn
    (`drawn`, equivalents included) from a pool of `of`, and each stands for of/drawn."""
    w = sample["of"] / sample["drawn"]
    rest_counted, rest_killed = counted - sample["counted"], killed - sample["killed"]
    whole = rest_counted + w * sample["counted"]
    return round((rest_killed + w * sample["killed"]) / whole, 4) if whole else 1.0


def sample_pool(copy: Path) -> dict:
    """A kept copy's --sample pool: the mutants with no verdict when --sample was first asked,
    in an order shuffled once (seeded by the pool's size: the same copy, the same order), and
    how many of them were drawn so far (`drawn`: the first ones)."""
    path = copy / SAMPLE_FILE
    if path.is_file():
        data: dict = json.loads(path.read_text())
        return data
    pool = sorted(k for per in read_statuses(copy).values() for k, s in per.items() if s in UNRUN)
    random.Random(len(pool)).shuffle(pool)
    return {"pool": pool, "drawn": 0}


def sampled_result(statuses: dict[str, dict[str, str]], equivalent: dict[str, str],
                   pool: dict) -> tuple[dict, dict[str, float]]:
    """The package's figures and each file's score, of a run whose undrawn pool is left out
    and whose drawn part is weighted (`estimate`)."""
    drawn = set(pool["pool"][: pool["drawn"]])
    undrawn = set(pool["pool"]) - drawn
    flat = {k: s for per in statuses.values() for k, s in per.items()}
    result = score_of({k: s for k, s in flat.items() if k not in undrawn}, equivalent)
    in_sample = score_of({k: flat[k] for k in drawn if k in flat}, equivalent)
    result["mutants"] = len(flat)
    result["sample"] = {"of": len(pool["pool"]), "drawn": len(drawn),
                        "killed": in_sample["killed"],
                        "counted": in_sample["mutants"] - in_sample["equivalent"]}
    counted = result["killed"] + len(result["survivors"])
    result["score"] = estimate(result["killed"], counted, result["sample"])
    files = {}
    for f, per in statuses.items():
        judged = score_of({k: s for k, s in per.items() if k not in undrawn}, equivalent)
        part = score_of({k: s for k, s in per.items() if k in drawn}, equivalent)
        files[f] = estimate(judged["killed"], judged["killed"] + len(judged["survivors"]),
                            {**result["sample"], "killed": part["killed"],
                             "counted": part["mutants"] - part["equivalent"]})
    return result, files


def score_of(statuses: dict[str, str], equivalent: dict[str, str]) -> dict:
    counted = {k: s for k, s in statuses.items() if k not in equivalent}
    killed = sum(s in ("killed", "caught by type check") for s in counted.values())
    return {
        "mutants": len(statuses),
        "killed": killed,
        "equivalent": len(statuses) - len(counted),
        "survivors": sorted(k for k, s in counted.items() if s not in ("killed", "caught by type check")),
        "score": round(killed / len(counted), 4) if counted else 1.0,
    }


def prepare_copy(copy: Path, name: str, spec: dict) -> None:
    copy.mkdir(parents=True, exist_ok=True)
    checkout_copy(copy)
    # pgle.cli is cli/ (package-dir in pyproject.toml): in the copy it lives where `import`
    # finds it without the editable install (tests/mutants/site/mutation_setup.py).
    shutil.copytree(copy / "cli", copy / "pgle" / "cli", dirs_exist_ok=True)
    narrow_config(copy, spec["files"], spec["tests"], spec.get("deselect", []),
                  spec.get("markers", MARKERS))
    (copy / MARK).write_text(name)  # last: a copy without it was never finished


def mutmut_alone(copy: Path) -> Path:
    """A folder holding only mutmut (links to its package and metadata), for the PYTHONPATH of
    a lane venv's interpreter (tests/xla_gpu/lane.venv_env): the mutated code imports mutmut's
    trampoline, and this Python's whole site-packages would shadow the venv's own jax and
    numpy. mutmut 3.8.1's trampoline is pure Python (checked under the lane's Python 3.13)."""
    import mutmut

    package = Path(mutmut.__file__).resolve().parent
    alone = copy / "mutmut-alone"
    alone.mkdir(exist_ok=True)
    for source in [package, *package.parent.glob("mutmut-*.dist-info")]:
        link = alone / source.name
        if not link.is_symlink():
            link.symlink_to(source)
    return alone


def missing_needs(spec: dict) -> list[str]:
    """The modules a package's tests need in the run's own Python (`needs`) that it lacks:
    without them those tests skip and the package's figure would fall for want of a module."""
    import importlib.util

    def found(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except ImportError:  # a parent package missing
            return False

    return [m for m in spec.get("needs", []) if not found(m)]


def changed_since(copy: Path) -> list[str]:
    """The code and tests that differ between the checkout and a kept copy (what the run
    executes: docs, this harness and the narrowed pyproject.toml may differ)."""
    ran = [rel for rel in checkout_files()
           if rel.startswith(("pgle/", "cli/", "tests/")) and not rel.startswith("tests/mutants/")]
    return [rel for rel in ran if not (copy / rel).is_file()
            or (copy / rel).read_bytes() != copied_text(rel)]


def torn_mutants(copy: Path) -> list[str]:
    """The mutated files a kept copy holds empty where their source is not: mutmut was stopped
    while it wrote them, and a resumed run would import the empty module (an ImportError)."""
    out = copy / "mutants"
    return [str(f.relative_to(out)) for f in sorted(out.rglob("*.py"))
            if f.stat().st_size == 0 and (copy / f.relative_to(out)).is_file()
            and (copy / f.relative_to(out)).stat().st_size > 0] if out.is_dir() else []


def still_to_run(copy: Path, names: list[str]) -> list[str]:
    """Of `names`, the mutants a kept copy has no verdict for: mutmut reruns every mutant named
    on its command line, verdict or not, so a stopped --survivors run resumes by naming only
    these (an empty list: all have one)."""
    done = {k for per in read_statuses(copy).values() for k, s in per.items()
            if s not in UNRUN}
    return [k for k in names if k not in done]


def run_package(name: str, spec: dict, jobs: int, show: bool = False,
                recorded: dict | None = None, scratch: Path | None = None,
                refresh: bool = False, sample: int = 0) -> dict:
    """Score one package. `recorded` (--survivors): rerun only that record's survivors; every
    other mutant keeps its recorded verdict (killed or equivalent), which holds as long as the
    code is the recorded one and tests were only added (checked: the same mutants).
    `refresh` (with a kept `scratch` copy): the copy takes the checkout's code and tests, then
    mutmut reruns the mutants of every function whose code changed (its own per-function
    hashes), and every mutant not killed is run again with the tests as they are now. A
    package whose test selection changed (its `tests`, `deselect` or `markers`) starts over:
    mutmut 3.8.1 resets every verdict when its test-selection settings differ from its last
    run's (`_apply_config_change_invalidation`).
    `sample` (with a kept `scratch` copy that has mutants): N more of its pool (`sample_pool`)
    are judged, with every mutant outside the pool still without a verdict; a copy sampled
    once stays sampled (its undrawn pool never runs)."""
    equivalent = json.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    if recorded is not None and not recorded["survivors"]:
        return {k: v for k, v in recorded.items() if k != "date"}  # nothing left to rerun
    if lacking := missing_needs(spec):
        print(f"score.py: {name} needs {', '.join(lacking)} in {sys.executable} "
              f"({spec.get('needs_how', 'see its entry in pyproject.toml')})", file=sys.stderr)
        raise SystemExit(2)
    mutmut = Path(sys.executable).with_name("mutmut")  # not `-m mutmut`: mutmut asks so
    if not mutmut.is_file():
        raise SystemExit(
            f"score.py: mutmut is not installed beside {sys.executable}: "
            "pip install -e '.[mutation]' (exit 2)"
        )
    kept = contextlib.nullcontext(str(scratch)) if scratch else None
    with kept or tempfile.TemporaryDirectory(prefix=f"pgle-mutmut-{name}-") as tmp:
        copy = Path(tmp)
        if not (copy / MARK).is_file():
            prepare_copy(copy, name, spec)
        elif (made := (copy / MARK).read_text().strip()) != name:
            raise SystemExit(f"{name}: --scratch {copy} holds a run of {made!r}: "
                             "name another folder")
        elif refresh:
            prepare_copy(copy, name, spec)  # the checkout's code and tests over the copy's
        elif differ := changed_since(copy):
            raise SystemExit(f"{name}: --scratch {copy} holds a run of other code "
                             f"({', '.join(differ[:3])} differ): remove it to start again")
        if torn := torn_mutants(copy):
            raise SystemExit(f"{name}: --scratch {copy} holds mutants mutmut did not finish "
                             f"writing ({', '.join(torn[:3])} empty): remove it to start again")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "MUTANT_UNDER_TEST")}
        env["PYTHONPATH"] = str(HERE / "site")
        env["PGLE_MUTATION_RUN"] = str(copy / "mutants")
        # pytest's numbered tmp_path folders, in the copy: mutmut's forked test runs end with
        # os._exit, so pytest never marks them done and never removes them (57 GB of /tmp
        # after a week of runs).
        env["PYTEST_DEBUG_TEMPROOT"] = str(copy / "pytest-tmp")
        (copy / "pytest-tmp").mkdir(exist_ok=True)
        env["PGLE_MUTATION_VENV_PATH"] = os.pathsep.join([str(HERE / "site"),
                                                          str(mutmut_alone(copy))])
        t0 = time.monotonic()
        only = still_to_run(copy, recorded["survivors"]) if recorded else []
        pool = None
        if sample or (copy / SAMPLE_FILE).is_file():  # a sampled copy stays one
            if not (had := read_statuses(copy)):
                raise SystemExit(f"{name}: --sample: {copy} holds no mutants yet: run the "
                                 "package there first (stop it any time)")
            pool = sample_pool(copy)
            pool["drawn"] = min(pool["drawn"] + sample, len(pool["pool"]))
            (copy / SAMPLE_FILE).write_text(json.dumps(pool))
            in_pool = set(pool["pool"])
            only = still_to_run(copy, [k for per in had.values() for k in per if k not in in_pool]
                                + pool["pool"][: pool["drawn"]])
        undrawn = set(pool["pool"][pool["drawn"]:]) if pool else set()
        if (recorded or pool) and not only:  # all named have a verdict already
            proc = subprocess.CompletedProcess([], 0, "", "")
        else:
            proc = subprocess.run([str(mutmut), "run", "--max-children", str(jobs), *only],
                                  cwd=copy, env=env, capture_output=True, text=True)
        if refresh and proc.returncode == 0:
            # Listed equivalents are left out: nothing kills them, and with the subprocesses'
            # hits mapped each runs every test that reaches its function (evidence's 159).
            left = sorted(k for per in read_statuses(copy).values() for k, s in per.items()
                          if s not in ("killed", "caught by type check") and k not in equivalent
                          and k not in undrawn)
            if left:  # the tests added since may kill them now
                # with a test map collected afresh: mutmut keeps its map of which tests reach
                # which function from the copy's first run, and a function added since (the
                # evidence package's `stacks._thread_number`) maps to none, so its mutants
                # read as survivors although its tests kill them. The first pass above still
                # used the old map's function hashes to find the changed functions.
                (copy / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
                proc = subprocess.run([str(mutmut), "run", "--max-children", str(jobs), *left],
                                      cwd=copy, env=env, capture_output=True, text=True)
        seconds = round(time.monotonic() - t0)
        statuses = read_statuses(copy)
        if proc.returncode != 0 or not statuses:
            sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
            raise SystemExit(f"{name}: mutmut run failed (exit {proc.returncode})")
        if recorded:
            statuses = merged_with_record(statuses, recorded, name)
        flat = {k: s for per in statuses.values() for k, s in per.items()}
        if pool and pool["pool"]:
            result, files = sampled_result(statuses, equivalent, pool)
        else:
            result = score_of(flat, equivalent)
            files = {f: score_of(s, equivalent)["score"] for f, s in statuses.items()}
        if show:  # each survivor's diff, while the copy still exists
            for mutant in result["survivors"]:
                diff = subprocess.run([str(mutmut), "show", mutant], cwd=copy, env=env,
                                      capture_output=True, text=True).stdout
                print(f"--- {mutant} ({flat[mutant]})\n{diff.strip()}")
    result["files"] = files
    result["seconds"] = seconds
    result["tests"] = spec["tests"]
    return result


def merged_with_record(statuses: dict[str, dict[str, str]], recorded: dict,
                       name: str) -> dict[str, dict[str, str]]:
    """A --survivors run's statuses: the survivors' new ones, every other mutant killed as
    recorded. Refused when the mutants are not the recorded ones (the code changed)."""
    keys = {k for per in statuses.values() for k in per}
    if len(keys) != recorded["mutants"] or not set(recorded["survivors"]) <= keys:
        raise SystemExit(f"{name}: the code changed since its recorded run ({len(keys)} mutants, "
                         f"{recorded['mutants']} recorded): run the package whole")
    rerun = set(recorded["survivors"])
    return {f: {k: (st if k in rerun else "killed") for k, st in per.items()}
            for f, per in statuses.items()}


def fell(old: dict, new: dict) -> list[str]:
    """What fell below the ratchet: the package's score, or any file's."""
    out = []
    if new["score"] < old.get("score", 0.0):
        out.append(f"score {new['score']:.4f} < {old['score']:.4f}")
    for f, s in new.get("files", {}).items():
        if s < old.get("files", {}).get(f, 0.0):
            out.append(f"{f}: {s:.4f} < {old['files'][f]:.4f}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("packages", nargs="*", help="package names of pyproject.toml (default: all)")
    ap.add_argument("--list", action="store_true", help="show the packages and exit")
    ap.add_argument("--check", action="store_true", help="exit 1 if a score fell below scores.json")
    ap.add_argument("--write", action="store_true", help="record the new scores in scores.json")
    ap.add_argument("--doc", action="store_true",
                    help="only rewrite docs/development.md's table from scores.json")
    ap.add_argument("--show", action="store_true", help="print each survivor's diff")
    ap.add_argument("--survivors", action="store_true",
                    help="rerun only the recorded survivors (after adding tests; the code "
                         "unchanged), the other mutants keep their recorded verdicts")
    ap.add_argument("--scratch", type=Path, metavar="DIR",
                    help="one package: make its copy in DIR and keep it; run again with the "
                         "same DIR (the checkout unchanged) to resume an interrupted run")
    ap.add_argument("--refresh", action="store_true",
                    help="with --scratch DIR holding this package's run: bring DIR's code and "
                         "tests up to the checkout, rerun the mutants of changed functions and "
                         "every mutant not killed (incremental, after adding tests or fixes)")
    ap.add_argument("--sample", type=int, default=0, metavar="N",
                    help="with --scratch DIR holding this package's stopped run: judge N more "
                         "mutants drawn at random from those it had not run (an estimate)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    args = ap.parse_args(argv)
    specs = packages()
    if args.doc:
        write_doc_table(json.loads(SCORES.read_text()))
        return 0
    if args.list:
        for name, spec in specs.items():
            print(f"{name}: {' '.join(spec['files'])}\n    tests: {' '.join(spec['tests'])}")
        return 0
    if args.scratch and len(args.packages) != 1:
        ap.error("--scratch: name one package")
    if args.refresh and not (args.scratch and (args.scratch / MARK).is_file()):
        ap.error("--refresh: needs --scratch DIR holding this package's earlier run")
    if args.sample and not (args.scratch and (args.scratch / MARK).is_file()):
        ap.error("--sample: needs --scratch DIR holding this package's earlier run")
    if args.sample and args.survivors:
        ap.error("--sample judges mutants not run yet: drop --survivors")
    if args.refresh and args.survivors:
        ap.error("--refresh reruns every mutant not killed already: drop --survivors")
    unknown = [p for p in args.packages if p not in specs]
    if unknown:
        ap.error(f"unknown package(s) {', '.join(unknown)}: see --list")
    ratchet = json.loads(SCORES.read_text()) if SCORES.exists() else {}
    failed = False
    for name in args.packages or list(specs):
        if args.survivors and name not in ratchet:
            ap.error(f"--survivors: {name} has no recorded run in {SCORES.name}")
        if args.survivors and "sample" in ratchet[name]:  # its undrawn mutants were never run
            ap.error(f"--survivors: {name}'s record is a sample: --refresh its kept copy")
        result = run_package(name, specs[name], args.jobs, args.show,
                             ratchet[name] if args.survivors else None, args.scratch,
                             args.refresh, args.sample)
        print(f"{name}: {result['killed']}/{result['killed'] + len(result['survivors'])} killed "
              f"({result['score']:.1%}{sampled(result)}; {result['equivalent']} equivalent; "
              f"{result['seconds']} s)")
        for s in result["survivors"]:
            print(f"    survived: {s}")
        if args.check and name in ratchet and (drops := fell(ratchet[name], result)):
            print(f"    FELL: {'; '.join(drops)}")
            failed = True
        if args.write:
            result["date"] = dt.date.today().isoformat()
            # Read again: another package's run (hours long) may have recorded its figures
            # since this one started.
            ratchet = json.loads(SCORES.read_text()) if SCORES.exists() else {}
            ratchet[name] = result
            SCORES.write_text(json.dumps(ratchet, indent=1, sort_keys=True) + "\n")
            write_doc_table(ratchet)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
