"""The mutation score's ratchet (tests/mutants/score.py, docs/development.md): its figures are
a run's, of packages pyproject.toml configures, shown in the docs exactly as recorded; every
equivalent mutant says why; a fall is refused. (The mutation run itself is a separate command:
it runs each package's tests once per mutant.)"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("score", ROOT / "tests" / "mutants" / "score.py")
score = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(score)


def test_the_ratchet_names_configured_packages_with_consistent_figures():
    ratchet = json.loads(score.SCORES.read_text())
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pgle-mutation"]["packages"]
    assert ratchet and set(ratchet) <= set(packages)
    for name, r in ratchet.items():
        unjudged = r["sample"]["of"] - r["sample"]["drawn"] if "sample" in r else 0
        counted = r["mutants"] - r["equivalent"] - unjudged
        assert r["killed"] + len(r["survivors"]) == counted, name
        assert r["score"] == (score.estimate(r["killed"], counted, r["sample"]) if "sample" in r
                              else round(r["killed"] / counted, 4)), name
        # Tests added since the recorded run keep its figure a floor (more tests kill no fewer
        # mutants); a test taken away needs a new run, or the floor measures tests that left.
        assert set(r["tests"]) <= set(packages[name]["tests"]), \
            f"{name}: tests removed since the recorded run"


def test_equivalent_mutants_say_why():
    for mutant, why in json.loads(score.EQUIVALENT.read_text()).items():
        assert mutant.startswith("pgle.") and "__mutmut_" in mutant
        assert len(why.split()) >= 5, mutant


def test_the_docs_table_is_the_ratchets():
    text = (ROOT / "docs" / "development.md").read_text()
    a = text.index(score.TABLE_START) + len(score.TABLE_START)
    assert text[a:text.index(score.TABLE_END)].strip() == score.scores_table(
        json.loads(score.SCORES.read_text())), "run `python3 tests/mutants/score.py --doc`"


def test_a_fall_is_refused_and_a_rise_is_not():
    old = {"score": 0.9, "files": {"pgle/a.py": 0.9, "pgle/b.py": 1.0}}
    assert score.fell(old, {"score": 0.9, "files": {"pgle/a.py": 0.95, "pgle/b.py": 1.0}}) == []
    assert score.fell(old, {"score": 0.89, "files": {"pgle/a.py": 0.9, "pgle/b.py": 1.0}})
    assert score.fell(old, {"score": 0.95, "files": {"pgle/a.py": 1.0, "pgle/b.py": 0.9}}) == [
        "pgle/b.py: 0.9000 < 1.0000"]


@pytest.mark.parametrize(
    "which",
    ["independent", "regression", "heldout", "heldout2", "heldout3", "heldout4", "heldout5",
     "heldout6"],
)
def test_every_mutant_still_applies_to_the_code(which):
    """tests/mutants/independent.py, mutants.py and heldout*.py find each mutant by
    its exact text: a refactor that moves one must move the mutant with it, or the kill rate
    silently measures fewer bugs (two regression mutants once went stale unnoticed: nothing
    ran that list)."""
    script = ROOT / "tests" / "mutants" / "independent.py"
    proc = subprocess.run([sys.executable, str(script), "--set", which, "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mutants apply" in proc.stdout, proc.stdout


def test_a_kept_copy_resumes_only_on_the_code_it_was_made_from(tmp_path):
    """`--scratch DIR` resumes an interrupted run in its kept copy: only while the code and
    tests it executes are the checkout's (a changed line would give the mutants already run
    verdicts of other code); docs may change meanwhile."""
    copy = tmp_path / "copy"
    score.prepare_copy(copy, "redact", score.packages()["redact"])
    assert (copy / score.MARK).read_text() == "redact"
    assert (copy / "pgle" / "cli" / "main.py").is_file()  # cli/ where `import pgle.cli` looks
    assert 'only_mutate = ["pgle/redact.py"]' in (copy / "pyproject.toml").read_text()
    assert score.changed_since(copy) == []
    (copy / "docs" / "development.md").write_text("edited while the run was away\n")
    assert score.changed_since(copy) == []
    with (copy / "pgle" / "redact.py").open("a") as f:
        f.write("# a line the run did not mutate\n")
    (copy / "tests" / "test_redact_units.py").unlink()
    assert score.changed_since(copy) == ["pgle/redact.py", "tests/test_redact_units.py"]
    # mutmut stopped while it wrote a mutated module: the empty file is named, not resumed on
    assert score.torn_mutants(copy) == []
    (copy / "mutants" / "pgle" / "launch").mkdir(parents=True)
    (copy / "mutants" / "pgle" / "redact.py").write_text("")
    (copy / "mutants" / "pgle" / "launch" / "__init__.py").write_text("")  # empty at source
    assert score.torn_mutants(copy) == ["pgle/redact.py"]


def test_a_package_selects_its_own_markers_and_is_refused_without_what_it_needs(tmp_path,
                                                                              capsys):
    """`commands` takes its `xla_gpu_inprocess` tests (tune --predict on XLA:GPU's compiler) into
    the run, other packages keep `not xla_gpu and not slurm`; a package whose `needs` the run's
    Python lacks is refused in one line, exit 2, before any copy is made."""
    specs = score.packages()
    copy = tmp_path / "copy"
    score.prepare_copy(copy, "commands", specs["commands"])
    text = (copy / "pyproject.toml").read_text()
    assert '"-m", "not slurm and (not xla_gpu or xla_gpu_inprocess)"' in text
    assert "tests/xla_gpu/test_predict_units.py" in text
    other = tmp_path / "other"
    score.prepare_copy(other, "redact", specs["redact"])
    assert '"-m", "not xla_gpu and not slurm"' in (other / "pyproject.toml").read_text()
    assert score.missing_needs({"needs": ["json", "no_such_pkg_pgle.sub"]}) == [
        "no_such_pkg_pgle.sub"]
    assert score.missing_needs(specs["redact"]) == []
    spec = {**specs["redact"], "needs": ["no_such_pkg_pgle"], "needs_how": "make it so"}
    with pytest.raises(SystemExit) as e:
        score.run_package("redact", spec, 1, recorded={**json.loads(score.SCORES.read_text())[
            "redact"], "survivors": ["x"]})
    assert e.value.code == 2
    assert capsys.readouterr().err == (
        f"score.py: redact needs no_such_pkg_pgle in {sys.executable} (make it so)\n")


def test_a_stopped_survivors_run_resumes_with_the_mutants_it_had_not_run(tmp_path):
    """mutmut reruns every mutant named on its command line: a kept copy's --survivors run
    names only those without a verdict yet (exit codes as mutmut 3 writes them per file)."""
    copy = tmp_path / "copy"
    assert score.still_to_run(copy, ["m.a", "m.b"]) == ["m.a", "m.b"]  # a fresh copy: all
    meta = copy / "mutants" / "pgle" / "x.py.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": {
        "m.a": 1, "m.b": None, "m.c": 0, "m.d": 2, "m.e": -24}}))  # killed, unrun, survived,
    # interrupted, timeout
    assert score.still_to_run(copy, ["m.a", "m.b", "m.c", "m.d", "m.e", "m.f"]) == [
        "m.b", "m.d", "m.f"]
    assert score.still_to_run(copy, ["m.a", "m.c"]) == []


def _metas(copy, codes: dict[str, dict[str, int | None]]) -> None:
    """mutmut 3's per-file records of a kept copy: mutant -> exit code (None: not run yet)."""
    for rel, by_key in codes.items():
        meta = copy / "mutants" / f"{rel}.meta"
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps({"exit_code_by_key": by_key}))


def test_a_sampled_run_weighs_each_drawn_mutant_for_the_pool_it_was_drawn_from(tmp_path):
    """A run stopped with 6 of 10 mutants judged (5 killed, one survivor), then --sample 2 of
    the 4 left: both drawn survive. Each stands for 2 of the pool, so the estimate is
    5 / (6 + 2 x 2) = 50%, not the 5/8 of the judged nor the 5/6 before the sample; the two
    undrawn are neither survivors nor counted, and the pool keeps its order from run to run."""
    copy = tmp_path / "copy"
    judged = {f"pgle.a.x_f__mutmut_{i}": 1 for i in range(5)} | {"pgle.a.x_f__mutmut_5": 0}
    unrun = {f"pgle.a.x_g__mutmut_{i}": None for i in range(4)}
    _metas(copy, {"pgle/a.py": judged | unrun})
    pool = score.sample_pool(copy)
    assert sorted(pool["pool"]) == sorted(unrun) and pool["drawn"] == 0
    assert score.sample_pool(copy)["pool"] == pool["pool"]  # seeded: the same order again
    pool["drawn"] = 2
    drawn = pool["pool"][:2]
    _metas(copy, {"pgle/a.py": judged | unrun | {k: 0 for k in drawn}})
    result, files = score.sampled_result(score.read_statuses(copy), {}, pool)
    assert result["survivors"] == sorted(["pgle.a.x_f__mutmut_5", *drawn])
    assert (result["killed"], result["mutants"], result["equivalent"]) == (5, 10, 0)
    assert result["sample"] == {"of": 4, "drawn": 2, "killed": 0, "counted": 2}
    assert result["score"] == 0.5 == files["pgle/a.py"]
    # an equivalent drawn mutant is not counted, and stands for none of the pool's
    result, _ = score.sampled_result(score.read_statuses(copy), {drawn[0]: "why"}, pool)
    assert result["sample"]["counted"] == 1 and result["score"] == round(5 / (6 + 2), 4)


def test_sample_is_refused_without_a_kept_run_that_has_mutants(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        score.main(["redact", "--sample", "5"])
    assert e.value.code == 2
    assert "--sample: needs --scratch DIR" in capsys.readouterr().err
    copy = tmp_path / "copy"
    score.prepare_copy(copy, "redact", score.packages()["redact"])
    with pytest.raises(SystemExit) as e:
        score.run_package("redact", score.packages()["redact"], 1, scratch=copy, sample=5)
    assert str(e.value) == (f"redact: --sample: {copy} holds no mutants yet: run the package "
                            "there first (stop it any time)")


def test_survivors_is_refused_for_a_sampled_record(tmp_path, monkeypatch, capsys):
    """A sampled record's undrawn mutants were never run: rerunning its survivors alone and
    counting every other mutant killed would count those too. Refused, exit 2."""
    scores = tmp_path / "scores.json"
    recorded = json.loads(score.SCORES.read_text())["redact"]
    scores.write_text(json.dumps({"redact": {**recorded, "sample": {
        "of": 4, "drawn": 2, "killed": 0, "counted": 2}}}))
    monkeypatch.setattr(score, "SCORES", scores)
    with pytest.raises(SystemExit) as e:
        score.main(["redact", "--survivors"])
    assert e.value.code == 2
    assert "redact's record is a sample: --refresh its kept copy" in capsys.readouterr().err
