"""An empty profile (every CPU run: XLA:CPU records no device kernels) is refused without
--allow-empty: exit 1, the diagnosis, nothing written; with --allow-empty it is written and
said to be empty. Both outputs: one file, and a per-module directory."""

from __future__ import annotations

from helpers.pgle_testing import marked_steps_script, pgle_lines, report_of, run_pgle

STEPS = marked_steps_script(6, 64)


def test_an_empty_profile_is_refused_then_written_with_allow_empty(project):
    (project / "steps.py").write_text(STEPS)
    proc = run_pgle("collect", "--steps", "2:2", "-o", "p.pb", "steps.py", cwd=project)
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    lines = pgle_lines(proc)
    failed = [line for line in lines
              if line.startswith("pgle: collect failed: the profile is empty: ")]
    assert failed and "backend cpu" in failed[0], lines
    assert "pgle: pass --allow-empty to write it anyway" in lines
    assert not (project / "p.pb").exists() and not (project / "p.pb.manifest.json").exists()
    report = report_of(run_pgle("collect", "--steps", "2:2", "-o", "p.pb", "--allow-empty",
                                "--json", "steps.py", cwd=project))
    assert report["status"] == "empty" and report["exit_code"] == 0
    assert (project / "p.pb").exists()


def test_an_empty_per_module_profile_is_refused(project):
    (project / "steps.py").write_text(STEPS)
    proc = run_pgle("collect", "--steps", "2:2", "--per-module", "-o", "profiles",
                    "--json", "steps.py", cwd=project)
    assert proc.returncode == 1
    report = report_of(proc)
    assert report["status"] == "empty" and report["profile"]["path"] is None
    assert report["summary"][0].startswith("collect failed: the per-module profile is empty: ")
    assert not (project / "profiles").exists()
