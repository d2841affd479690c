"""Issue 38: every command of README.md and docs/ runs in a test as written, with the outcome the
docs state, or is marked with the lane it needs and why.

Every ```bash block of README.md and docs/**/*.md is split into commands (`&&` and `;` separate,
a trailing `\\` joins, `# comments` are dropped). Each command must have an entry in SNIPPETS, and
each entry a command in the docs, so a new snippet fails here until it is run or marked:

- `exit N; stderr: TEXT` (or `stdout: TEXT`): run for real on CPU, in one temp project folder (below),
  through `bash -c`, and the exit code and a line containing TEXT are checked.
- `long: ...`: run like the above only with PGLE_LONG_SNIPPETS=1, skipped otherwise with the reason:
  workload runs beyond the ~13 the default suite affords (each is 5-25 s on 2 cores), mostly
  the same recipe with other options, or many runs in one (`--compare --repeat 5`).
- `needs: gpu|slurm|nsys|torch|estimate|self|install: why`: not run here. `slurm` ones run in the
  SLURM lane (test_slurm_snippets, marked `slurm`), scaled to the one-node test cluster.

The project folder holds examples/train.py (also as ./train.py, with a smaller model and 2 emulated
devices by default: the snippets' own options are kept; XLA:CPU's LLVM at -O0, which halves each
run's CPU: tests/helpers/cheap_train.py), `pgle` and `python` on PATH (this
interpreter), and small fixture files the snippets name (profile.pb, before.pb, rank0.pb, run.zip,
run.log, mypkg/, run.sh). `/shared/` is a folder inside it. Placeholders (`<run>`, `[--force]`,
`a | b`) are filled by the entry's `run=` form. Workload snippets run once each, in doc order, in
one module fixture; the cheap ones (inspect, diff, doctor, cache, store, verify, ...) read the
files that fixture and the shared collect left.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.cheap_train import cheap_train_source
from helpers.pgle_testing import DATA, REPO, pgle_env
from helpers.slurm_fixture import slurm_test

FENCE = re.compile(r"^\s*```(\w*)\s*$")


def documented_commands() -> list[tuple[str, str]]:
    """(file, command) for every command of every ```bash block, in doc order."""
    out = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        lines, lang, block = path.read_text().splitlines(), None, []
        for line in lines:
            m = FENCE.match(line)
            if m and lang is None:
                lang, block = m.group(1), []
            elif m or (lang is not None and line.strip() == "```"):
                if lang in ("bash", "sh", "shell", "console"):
                    out += [(str(path.relative_to(REPO)), c) for c in split_block(block, lang)]
                lang = None
            elif lang is not None:
                block.append(line)
    return out


def split_block(block: list[str], lang: str) -> list[str]:
    joined, cur = [], ""
    for line in block:
        if lang == "console":  # only the `$ pgle ...` prompts of a console block
            if not line.startswith("$ "):
                continue
            line = line[2:]
        cur += line.strip() if cur else line.rstrip()
        if cur.endswith("\\"):
            cur = cur[:-1].rstrip() + " "
            continue
        joined.append(cur)
        cur = ""
    out = []
    for line in joined:
        line = re.sub(r"\s+#\s.*$", "", line).strip()  # the comment, not a `#` inside a word
        for part in re.split(r"\s*(?:&&|;)\s*", line):
            if part.strip():
                out.append(part.strip())
    return out


@dataclasses.dataclass(frozen=True)
class Spec:
    expect: str  # "exit N; stderr: TEXT", "long: ...", "needs: LANE: why"
    run: str | None = None  # the command with its placeholders filled, when it has any
    files: tuple[str, ...] = ()  # project files it expects beside it afterwards
    in_repo: bool = False  # a developer's command: run in the checkout, not the project

    @property
    def lane(self) -> str:
        if self.expect.startswith("needs:"):
            return self.expect.split(":")[1].strip()
        return "long" if self.expect.startswith("long:") else "cpu"

    def outcome(self) -> tuple[int, str, str]:
        text = self.expect.removeprefix("long:").strip()
        m = re.fullmatch(r"exit (\d+)(?:; (stderr|stdout): (.+))?", text)
        assert m, f"malformed expectation {self.expect!r}"
        return int(m.group(1)), m.group(2) or "stderr", m.group(3) or ""


NA = "exit 0; stderr: verdict: not_applicable: backend cpu"
CPU_EMPTY = "exit 1; stderr: collect failed: the profile is empty: backend cpu"
PROJECT_SELF = "needs: self: the test suite itself (.ci/run)"
LINT = "needs: self: .ci/run's lint step runs it on every change"
# Not in CI: the mutation runs take minutes per mutant (docs/development.md, "Mutation testing");
# tests/test_mutation_ratchet.py checks the figures they recorded.
MUTATION = "needs: self: a mutation run, its own documented command (minutes per mutant)"
SLURM = "needs: slurm: srun (scaled to the test cluster in test_slurm_snippets)"
NSYS = "needs: nsys: Nsight Systems on PATH (tests/commands/test_nsys.py runs a stand-in)"
GPU_DIR = "/shared/jax-cache"

# The documented commands, and what each does on CPU (or the lane it needs). Keyed by
# (file, command as written); the same command in two files is run once per file.
SNIPPETS: dict[tuple[str, str], Spec] = {
    # README.md
    ("README.md", "pip install -e ."): Spec("needs: install: the environment these tests run in"),
    ("README.md", "pgle tune examples/train.py"): Spec(NA),
    ("README.md", "python3 -m pip install -e '.[test]'"): Spec(
        "needs: install: the environment these tests run in"),
    ("README.md", "python3 -m pytest -q -n 2 --dist loadgroup"): Spec(PROJECT_SELF),
    ("README.md", "pgle tune train.py -- --batch 64"): Spec("long: " + NA),
    ("README.md", "pgle collect train.py --steps 10:5 -o profile.pb -- --batch 64"): Spec(CPU_EMPTY),
    ("README.md", "pgle run --profile profile.pb --require-applied train.py -- --batch 64"): Spec(
        "exit 3; stderr: --require-applied: status is not_applicable, not applied"),
    ("README.md", "pgle prewarm --cache-dir /shared/jax-cache train.py -- --steps 20"): Spec(
        "exit 0; stderr: prewarm: "),
    ("README.md", "pgle nsys --cache-dir /shared/jax-cache -o report --trace=cuda,nvtx -- train.py "
                  "--steps 20"): Spec(NSYS),
    ("README.md", "srun -N 4 --ntasks-per-node 8 pgle tune train.py -- --steps 30"): Spec(SLURM),
}


def _build_snippets() -> None:
    """The docs/ entries (kept apart from the README's for reading)."""
    d = SNIPPETS
    dev = "docs/development.md"
    d[dev, "python3 -m pip install -e '.[test]'"] = Spec(
        "needs: install: the environment these tests run in")
    d[dev, "python3 -m pytest -q -n 2 --dist loadgroup"] = Spec(PROJECT_SELF)
    d[dev, "python3 docs/gen_cli_reference.py"] = Spec(
        "needs: self: tests/test_docs_help.py checks its output against the committed file")
    d[dev, "python3 docs/gen_api_reference.py"] = Spec(
        "needs: self: tests/test_docs_help.py checks its output against the committed file")
    for c in ("python3 -m ruff check pgle cli", "python3 -m ruff format --check pgle cli",
              "python3 -m mypy pgle cli", "python3 -m ruff check --fix pgle cli",
              "python3 -m ruff format pgle cli"):
        d[dev, c] = Spec(LINT)
    d[dev, "python3 tests/mutants/independent.py --set regression --write"] = Spec(MUTATION)
    d[dev, "python3 tests/mutants/independent.py --set regression --only I01"] = Spec(MUTATION)
    d[dev, "python3 tests/mutants/independent.py --set heldout --write"] = Spec(MUTATION)
    d[dev, "python3 tests/mutants/score.py --list"] = Spec("exit 0; stdout: verdicts.require",
                                                           in_repo=True)
    for cmd in ("verdicts.require --show", "store --check", "store --write", "jobs --survivors --write",
                "--check"):
        d[dev, f"python3 tests/mutants/score.py {cmd}"] = Spec(MUTATION)
    d[dev, "python3 tests/mutants/score.py jobs --write --scratch /tmp/mm-jobs"] = Spec(MUTATION)
    d[dev, "python3 tests/mutants/score.py jobs --write --scratch /tmp/mm-jobs --refresh"] = Spec(
        MUTATION)
    d[dev, "bash .ci/plugin_venv.sh /tmp/plugin-venv"] = Spec(
        "needs: install: a venv with the CUDA compiler plugin (.ci/xla_gpu_tests.sh makes it)")
    d[dev, "/tmp/plugin-venv/bin/python tests/mutants/score.py commands --write"] = Spec(MUTATION)
    d[dev, "python3 tests/mutants/independent.py --set regression --list"] = Spec(
        "exit 0; stdout: V01", in_repo=True)
    d[dev, "python3 tests/mutants/independent.py --list"] = Spec("exit 0; stdout: V1 ",
                                                                 in_repo=True)
    for cmd in ("--baseline", "--write", "--package store --only S1"):
        d[dev, f"python3 tests/mutants/independent.py {cmd}"] = Spec(MUTATION)

    gv = "docs/gpu-validation.md"
    for c in ("pip install -e .",
              "pgle collect examples/train.py --steps 3:5 -o $OUT/train.pb --json > $OUT/collect.json",
              "TF_CPP_VMODULE=gpu_hlo_schedule=1,profile_guided_latency_estimator=1 pgle run "
              "--profile $OUT/train.pb --log $OUT/run.log --json examples/train.py > $OUT/run.json",
              "pgle tune examples/train.py --json > $OUT/tune.json"):
        d[gv, c] = Spec("needs: gpu: the GPU validation script (run on a GPU machine)")

    au = "docs/guide/auto-pgle-and-nsys.md"
    d[au, "pgle auto train.py --runs 3 --percentile 90 -- --steps 50"] = Spec(
        "long: exit 0; stderr: empty_profile")
    d[au, "pgle auto train.py --require 'jit_train_step*' -- --steps 50"] = Spec(
        "exit 3; stderr: not verified: jit_train_step is empty_profile")
    d[au, "pgle prewarm --cache-dir /shared/jax-cache train.py -- --steps 20"] = Spec(
        "exit 0; stderr: prewarm: ")
    d[au, "pgle nsys --cache-dir /shared/jax-cache -o report --trace=cuda,nvtx -- train.py "
          "--steps 20"] = Spec(NSYS)
    d[au, "pgle cache ls /shared/jax-cache [--module 'jit_train*']"] = Spec(
        "exit 0; stdout: jit_train", run="pgle cache ls /shared/jax-cache --module 'jit_train*'")
    d[au, "pgle cache stats /shared/jax-cache"] = Spec("exit 0; stdout: jit_train_step")
    d[au, "pgle cache prune /shared/jax-cache --older-than 7d"] = Spec("exit 0; stderr: dry run")
    d[au, "pgle cache prune /shared/jax-cache --older-than 7d --yes"] = Spec(
        "exit 0; stderr: deleted 0 of")
    d[au, "pgle cache prune /shared/jax-cache --module jit_old_step --yes"] = Spec(
        "exit 0; stderr: deleted 0 of")

    cl = "docs/guide/cluster.md"
    for c in ("srun -N 4 --ntasks-per-node 8 pgle collect train.py -o profile.pb -- --steps 30",
              "srun -N 4 --ntasks-per-node 8 pgle run --profile profile.pb train.py -- --steps 30",
              "srun -N 4 --ntasks-per-node 8 pgle tune train.py -- --steps 30",
              "srun ... pgle prewarm --cache-dir /shared/jax-cache train.py",
              "srun ... pgle nsys --cache-dir /shared/jax-cache --ranks 0,8 -- train.py"):
        d[cl, c] = Spec(SLURM)
    d[cl, "pgle tune run.sh -- --steps 30"] = Spec("long: " + NA)
    d[cl, "pgle run --profile p.pb -- bash run.sh --steps 30"] = Spec(NA)
    d[cl, "pgle collect -o p.pb -- python -m mypkg.train --steps 30"] = Spec(
        "long: " + CPU_EMPTY)
    d[cl, "pgle auto -- torchrun --nproc_per_node 8 train.py"] = Spec(
        "needs: torch: torchrun (PyTorch's launcher) is not a test dependency")

    doc = "docs/guide/doctor.md"
    d[doc, "pgle doctor"] = Spec("exit 0; stdout: backend")
    d[doc, "pgle doctor --workflow nsys --cache-dir /shared/jax-cache"] = Spec(
        "exit 1; stderr: nsys")
    d[doc, "pgle doctor --probe --json > doctor.json"] = Spec(
        "exit 0", files=("doctor.json",))
    d[doc, 'pgle flags explain "$XLA_FLAGS"'] = Spec("exit 0; stderr: pgle: 0 flags")
    d[doc, "pgle view .pgle/runs/20260101-120000-collect-4242"] = Spec(
        "exit 0; stderr: http://127.0.0.1:")

    ma = "docs/guide/manual.md"
    d[ma, "pgle collect train.py --steps 10:5 -o profile.pb -- --batch 64"] = Spec(CPU_EMPTY)
    d[ma, "pgle collect train.py --delay 30 --duration 5 -o profile.pbtxt"] = Spec(
        "long: " + CPU_EMPTY, run="pgle collect train.py --delay 30 --duration 5 -o profile.pbtxt"
        " -- --steps 20000")  # the bundled train.py ends before 30 s unless told to run longer
    d[ma, "pgle collect -m mypkg.train -o profile.pb"] = Spec("long: " + CPU_EMPTY)
    d[ma, "pgle collect train.py --per-module -o profiles/ -- --batch 64"] = Spec(
        "long: exit 1; stderr: backend cpu")
    # On CPU the collect before it writes no profiles/ (an empty profile is refused, exit 1).
    d[ma, "pgle run --profile profiles/ train.py -- --batch 64"] = Spec(
        "needs: gpu: the per-module collect before it writes profiles/ only where XLA:GPU ran")
    d[ma, "pgle run --profile profile.pb train.py -- --batch 64"] = Spec("long: " + NA)
    d[ma, "pgle run --profile profile.pb --require-applied --min-coverage 0.95 train.py"] = Spec(
        "long: exit 3; stderr: --require-applied: status is not_applicable, not applied")
    d[ma, "pgle tune train.py -- --batch 64"] = Spec("long: " + NA)
    d[ma, "pgle verify run.log --profile profile.pb"] = Spec(NA)
    d[ma, "srun ... python train.py 2>&1 | pgle verify - --require-applied"] = Spec(SLURM)

    wi = "docs/guide/pgle-worth-it.md"
    d[wi, "pgle tune --compare default,o1,pgle,o1+pgle train.py -- --batch 64"] = Spec(
        "long: exit 0; stderr: needs a GPU")
    d[wi, "pgle tune --compare default,o1,sol,pgle,o1+pgle --repeat 5 --report worth-it.html "
          "train.py"] = Spec("long: exit 0; stderr: needs a GPU", files=("worth-it.html",))

    pr = "docs/guide/profiles.md"
    d[pr, "pgle inspect profile.pb --top 20"] = Spec("exit 0; stdout: fusion.1")
    d[pr, "pgle diff before.pb after.pb"] = Spec("exit 0; stdout: fusion.1")
    d[pr, "pgle merge rank*.pb -o merged.pb"] = Spec("exit 0; stderr: merged.pb",
                                                     files=("merged.pb",))
    d[pr, "pgle convert profile.pb profile.pbtxt"] = Spec(
        "exit 0; stderr: profile.pbtxt", files=("profile.pbtxt",))
    d[pr, "pgle convert .pgle/runs/<run>/trace/plugins/profile/<stamp> profiles/"] = Spec(
        "exit 2; stderr: has no GPU plane", run="pgle convert {trace} trace-profiles/")

    rp = "docs/guide/report.md"
    d[rp, "pgle tune train.py --report report.html"] = Spec(NA, files=("report.html",))
    d[rp, "pgle report .pgle/runs/<stamp>-tune-<pid>/ -o report.html [--force] [--json] "
          "[--dtype bf16]"] = Spec(
        "exit 0; stdout: \"verdict\"",
        run="pgle report {tune_run}/ -o report.html --force --json --dtype bf16")
    d[rp, "pgle report WITHOUT_RUN_FOLDER WITH_RUN_FOLDER -o report.html"] = Spec(
        "exit 0; stderr: report2.html",
        run="pgle report {tune_run}/run {tune_run}/run -o report2.html")

    ss = "docs/guide/sources-and-store.md"
    d[ss, "pgle convert run.zip profiles/"] = Spec(
        "exit 0; stderr: zip-profiles", run="pgle convert run.zip zip-profiles/")
    d[ss, "pgle convert report.sqlite profiles/ --dump xla-dump/"] = Spec(
        "needs: nsys: a report exported by `nsys export` (tests/profiles/test_nsys_convert.py "
        "builds one from the archive)")
    d[ss, "pgle convert report.nsys-rep profiles/ --dump xla-dump/"] = Spec(NSYS)
    d[ss, 'pgle store add  /shared/pgle-store profiles/ --device-kind "NVIDIA H100 80GB HBM3" '
          "--device-count 8"] = Spec(
        "exit 0; stderr: stored 6 module profiles",
        run='pgle store add  /shared/pgle-store zip-profiles/ --device-kind "NVIDIA H100 80GB '
            'HBM3" --device-count 8')
    d[ss, "pgle store ls   /shared/pgle-store > entries.txt"] = Spec(
        "exit 0", files=("entries.txt",))
    d[ss, 'pgle store get  /shared/pgle-store view/ --device-kind "NVIDIA H100 80GB HBM3"'] = Spec(
        "exit 0; stderr: view")
    d[ss, "XLA_FLAGS=--xla_gpu_pgle_profile_file_or_directory_path=$PWD/view python train.py"] = \
        Spec("long: exit 0; stdout: median step time")
    d[ss, "pgle store prune /shared/pgle-store --keep-last 3 | --older-than 30d | --jax 0.10.2"] = \
        Spec("exit 0; stderr: store", run="pgle store prune /shared/pgle-store --keep-last 3 "
                                          "--older-than 30d --jax 0.10.2")
    d[ss, "pgle store prune /shared/pgle-store --keep-last 3 --yes"] = Spec("exit 0; stderr: store")
    d[ss, "pgle tune --per-module --store /shared/pgle-store train.py"] = Spec(NA)
    d[ss, "pgle run --store /shared/pgle-store train.py"] = Spec(NA)
    d[ss, "pgle collect --per-module --store /shared/pgle-store --store-policy merge:5:p90 "
          "train.py"] = Spec("exit 1; stderr: nothing added (collect status empty)")

    wh = "docs/guide/will-pgle-help.md"
    d[wh, "pip install 'pgle[estimate]'"] = Spec("needs: install: the estimate extra")
    d[wh, "pgle estimate train.py -- --steps 5"] = Spec(
        "needs: estimate: the CUDA compiler plugin (tests/estimate runs in the xla_gpu lane)")
    d[wh, "pgle estimate train.py --what-if collective=x100 --json | jq .prediction"] = Spec(
        "needs: estimate: the CUDA compiler plugin (tests/estimate runs in the xla_gpu lane)")
    d[wh, "pgle estimate tests/estimate/helps_step.py --what-if all-gather=800us --what-if "
          "all-reduce=20us --what-if compute=x20"] = Spec(
        "needs: estimate: the CUDA compiler plugin (tests/xla_gpu/test_estimate.py runs this "
        "step in the xla_gpu lane)")
    # tune --compare --predict needs the plugin too; tests/commands/test_tune_predict.py runs
    # the command's CPU side (the plugin missing: one line, the tune goes on).
    d[wh, "pgle tune --compare default,o1,sol,pgle --predict --store /shared/pgle-store "
          "train.py"] = Spec(
        "needs: estimate: the CUDA compiler plugin (predicted ratios); "
        "tests/commands/test_tune_predict.py")


_build_snippets()

# The ones that launch a workload: run once each, in doc order (later ones read what earlier ones
# wrote: the tune run folder for `report`, the store for `run --store`).
LAUNCHES = re.compile(r"^(?:XLA_FLAGS=\S+ python train\.py|pgle (?:tune|run|collect|auto|prewarm)\b)")


def test_every_documented_command_is_run_or_marked():
    found = documented_commands()
    missing = [fc for fc in found if fc not in SNIPPETS]
    assert not missing, "documented commands neither run nor marked (add them to SNIPPETS):\n" + \
        "\n".join(f"  {f}: {c}" for f, c in missing)
    stale = [k for k in SNIPPETS if k not in found]
    assert not stale, f"SNIPPETS entries no doc has any more: {stale}"
    for key, spec in SNIPPETS.items():
        if spec.lane in ("cpu", "long"):
            spec.outcome()
        else:
            assert spec.lane in ("gpu", "slurm", "nsys", "torch", "estimate", "self", "install"), key
    assert len(found) >= 73, len(found)  # issue 38 counted 73 (and more were added since)


def test_the_extractor_reads_every_form():
    assert split_block(["a \\", "  b  # why", "c && d ; e"], "bash") == ["a b", "c", "d", "e"]
    assert split_block(["$ pgle x", "pgle: output"], "console") == ["pgle x"]


# -- the project folder ---------------------------------------------------------------------------


def small_train() -> str:
    """examples/train.py with a smaller model and 2 devices by default (options given win),
    compiled by LLVM at -O0: half the CPU of each of the ~14 workload runs below."""
    return cheap_train_source(small=True, devices=2)


@dataclasses.dataclass
class Project:
    root: Path
    env: dict[str, str]
    fill: dict[str, str]
    results: dict[tuple[str, str], subprocess.CompletedProcess]

    def sh(self, command: str, timeout: float = 600,
           cwd: Path | None = None) -> subprocess.CompletedProcess:
        """`command` through bash in the project. A profile it reads (profile.pb, p.pb) that a
        GPU collect would have written is the fixture, there only while the command runs, so
        that the documented `collect -o profile.pb` still finds no file in its way."""
        command = command.format(**self.fill).replace("/shared/", f"{self.root}/shared/")
        placed = []
        for name in ("profile.pb", "p.pb"):
            reads = re.search(rf"(--profile|inspect|convert|^pgle verify .*--profile) {re.escape(name)}\b",
                              command)
            if reads and not (self.root / name).exists():
                shutil.copy(self.root / "fixture.pb", self.root / name)
                placed.append(self.root / name)
        try:
            return subprocess.run(["bash", "-c", command], cwd=cwd or self.root, env=self.env,
                                  capture_output=True, text=True, timeout=timeout)
        finally:
            for path in placed:
                path.unlink()


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    from pgle.profiles.files import Profile, write_profile

    root = tmp_path_factory.mktemp("snippets")
    (root / "examples").mkdir()
    (root / "train.py").write_text(small_train())
    shutil.copy(root / "train.py", root / "examples" / "train.py")
    (root / "mypkg").mkdir()
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "train.py").write_text(
        "import sys\nsys.path.insert(0, '.')\nimport train\ntrain.main()\n")
    (root / "run.sh").write_text('#!/bin/bash\nexec python train.py "$@"\n')
    write_profile(Profile(costs=[("fusion.1", 12.5), ("fusion.2", 3.0)]), root / "fixture.pb")
    shutil.copy(root / "fixture.pb", root / "before.pb")
    write_profile(Profile(costs=[("fusion.1", 10.0), ("fusion.3", 1.0)]), root / "after.pb")
    shutil.copy(root / "fixture.pb", root / "rank0.pb")
    shutil.copy(root / "after.pb", root / "rank1.pb")
    shutil.copy(DATA / "nsys" / "pax_fsdp4_4proc_proc0.trimmed.zip", root / "run.zip")
    (root / "shared").mkdir()
    bindir = root / ".bin"
    bindir.mkdir()
    for name, target in (("pgle", f"{sys.executable} -m pgle"), ("python", sys.executable),
                         ("python3", sys.executable)):
        (bindir / name).write_text(f'#!/bin/sh\nexec {target} "$@"\n')
        (bindir / name).chmod(0o755)
    env = pgle_env(PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}",
                   XLA_FLAGS="--xla_gpu_enable_command_buffer=''")
    env.pop("XLA_FLAGS")  # `pgle flags explain "$XLA_FLAGS"` reads the caller's; set per command
    proj = Project(root, env, {}, {})
    # The one shared collect: its run folder is the doc's `pgle view` example, its trace the
    # `convert` example's, its log `verify`'s run.log.
    run = ".pgle/runs/20260101-120000-collect-4242"
    proc = proj.sh(f"pgle collect train.py --allow-empty --run-dir {run} -o collected.pb "
                   "-- --steps 8")
    assert proc.returncode == 0, proc.stderr
    (trace,) = (root / run / "trace" / "plugins" / "profile").iterdir()
    proj.fill["trace"] = str(trace.relative_to(root))
    return proj


def outcome_ok(spec: Spec, proc: subprocess.CompletedProcess) -> str | None:
    code, stream, text = spec.outcome()
    out = proc.stderr if stream == "stderr" else proc.stdout
    if proc.returncode != code or text not in out:
        return (f"exit {proc.returncode} (want {code}), {stream} lacks {text!r}:\n"
                + "\n".join((proc.stderr + proc.stdout).splitlines()[-12:]))
    return None


@pytest.fixture(scope="module")
def workloads(project):
    """Every default-lane snippet that launches a workload, once, in doc order."""
    long = os.environ.get("PGLE_LONG_SNIPPETS") == "1"
    for key, spec in SNIPPETS.items():
        command = spec.run or key[1]
        if not LAUNCHES.match(command) or spec.lane not in ("cpu", "long"):
            continue
        if spec.lane == "long" and not long:
            continue
        same = [k for k in project.results if (SNIPPETS[k].run or k[1]) == command]
        # The same command in two files runs once (README and a guide repeat recipes).
        project.results[key] = project.results[same[0]] if same else project.sh(command)
        if key == ("docs/guide/report.md", "pgle tune train.py --report report.html"):
            tune = sorted((project.root / ".pgle" / "runs").glob("*-tune-*"))[-1]
            project.fill["tune_run"] = str(tune.relative_to(project.root))
    # `pgle verify run.log`: the log of a run with the profile (the README's `pgle run`).
    # The first `pgle run` folder (doc order): the README's, with profile.pb.
    first = sorted((project.root / ".pgle" / "runs").glob("*-run-*"))[0]
    shutil.copy(first / "workload.log", project.root / "run.log")
    return project


def cheap_keys() -> list[tuple[str, str]]:
    return [k for k, s in SNIPPETS.items()
            if s.lane in ("cpu", "long") and not LAUNCHES.match(s.run or k[1])]


def launch_keys() -> list[tuple[str, str]]:
    return [k for k, s in SNIPPETS.items()
            if s.lane in ("cpu", "long") and LAUNCHES.match(s.run or k[1])]


def _skip_long(spec: Spec) -> None:
    if spec.lane == "long" and os.environ.get("PGLE_LONG_SNIPPETS") != "1":
        pytest.skip("a long snippet (several workload runs): PGLE_LONG_SNIPPETS=1 runs it")


@pytest.mark.parametrize("key", launch_keys(), ids=lambda k: f"{Path(k[0]).stem}:{k[1][:60]}")
def test_workload_snippet(workloads, key):
    spec = SNIPPETS[key]
    _skip_long(spec)
    bad = outcome_ok(spec, workloads.results[key])
    assert bad is None, f"{key[0]}: {key[1]}: {bad}"
    for name in spec.files:
        assert (workloads.root / name).exists(), name


@pytest.mark.parametrize("key", cheap_keys(), ids=lambda k: f"{Path(k[0]).stem}:{k[1][:60]}")
def test_cheap_snippet(project, request, key):
    spec = SNIPPETS[key]
    _skip_long(spec)
    command = spec.run or key[1]
    if command.startswith("pgle view"):
        return check_view(project, command, spec)
    if "{tune_run}" in command or re.search(r"/shared/jax-cache|run\.log", command):
        request.getfixturevalue("workloads")  # the tune folder, the prewarmed cache, a run's log
    proc = project.sh(command, timeout=300, cwd=REPO if spec.in_repo else None)
    bad = outcome_ok(spec, proc)
    assert bad is None, f"{key[0]}: {key[1]}: {bad}"
    for name in spec.files:
        assert (project.root / name).exists(), name


def check_view(project: Project, command: str, spec: Spec) -> None:
    """`pgle view` serves until stopped: read its address line, then stop it."""
    code, _, text = spec.outcome()
    env = {**project.env, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=project.root, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    seen = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            if text in line:
                return
        pytest.fail(f"{command}: no line with {text!r}: {''.join(seen)[-2000:]}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


# -- the SLURM lane -------------------------------------------------------------------------------


@slurm_test
def test_slurm_snippets(slurm_cluster, project):
    """The srun snippets on the one-node test cluster: `-N 4 --ntasks-per-node 8` becomes 2 tasks
    on one node, `srun ...` the same; the command after srun is as written. Minutes of jobs:
    the long lane's (.ci/run's docs step runs it with the cluster up)."""
    if os.environ.get("PGLE_LONG_SNIPPETS") != "1":
        pytest.skip("a long snippet (several workload runs): PGLE_LONG_SNIPPETS=1 runs it")
    ran = 0
    for (doc, command), spec in SNIPPETS.items():
        if spec.lane != "slurm" or "nsys" in command:
            continue
        inner = re.sub(r"^srun (?:-N 4 --ntasks-per-node 8|\.\.\.) ", "", command)
        full = f"srun -N 1 -n 2 {inner}"
        proc = project.sh(full)
        assert proc.returncode in (0, 1, 3), f"{doc}: {full}: {proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr, proc.stderr
        ran += 1
    assert ran >= 5


def test_tune_with_a_store_on_cpu_names_no_profile(workloads):
    """Issue 38: tune on CPU said `(with the profile)` of a run the store served nothing."""
    key = ("docs/guide/sources-and-store.md",
           "pgle tune --per-module --store /shared/pgle-store train.py")
    err = workloads.results[key].stderr
    assert "median step:" in err and "(with the profile)" not in err, err[-3000:]


def test_no_long_explanation_is_repeated(workloads):
    """Issue 38: a long explanation (the profiling window's, ~230 characters) said once per
    command, not once per phase: no clause of 60+ characters in two lines of one output."""
    for key, proc in workloads.results.items():
        seen: dict[str, str] = {}
        for line in proc.stderr.splitlines():
            # A launch line names its command and run folder once per launch (tune's arms each
            # launch): a fact per run, not an explanation repeated.
            if not line.startswith("pgle:") or line.startswith("pgle: running: "):
                continue
            for clause in re.split(r"; | \(|\): ", line):
                if len(clause) >= 60:
                    assert clause not in seen or seen[clause] == line, (key, clause)
                    seen[clause] = line
