"""`--force` on a directory output replaces only what pgle recognises as its own output (issue
20): a folder of `<fingerprint>.pb|.pbtxt` files and manifest.json. Anything else is refused with
exit 2, naming what would be lost; an output that is, lies inside or holds an input is refused."""

from __future__ import annotations

from pathlib import Path

from helpers.pgle_testing import pgle_lines, run_pgle

from pgle.profiles.files import Profile, write_profile

FA, FB = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"


def per_module(folder: Path) -> Path:
    for fp, cost in ((FA, 1.0), (FB, 2.0)):
        write_profile(Profile([("fusion.1", cost)]), folder / f"{fp}.pbtxt")
    return folder


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(proc, *words: str) -> str:
    assert proc.returncode == 2, proc.stderr.decode()
    assert "Traceback" not in proc.stderr.decode()
    lines = pgle_lines(proc)
    assert len(lines) == 1 and all(w in lines[0] for w in words), lines
    return lines[0]


def test_convert_into_the_working_folder_with_force_loses_nothing(project):
    per_module(project / "pm")
    (project / "thesis.tex").write_text("three years of work")
    before = snapshot(project)
    refused(run_pgle("convert", "pm", ".", "--force", cwd=project), "holds the input pm",
            "never replaces a folder it reads from")
    refused(run_pgle("convert", "pm", "pm", "--force", cwd=project), "is the input")
    refused(run_pgle("convert", "pm", "pm/sub", "--force", cwd=project), "is inside the input")
    assert snapshot(project) == before


def test_force_refuses_a_folder_with_anything_but_profiles(project):
    a, b = per_module(project / "a"), per_module(project / "b")
    out = project / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "plots").mkdir()
    (out / f"{FA}.pb").symlink_to(project / "thesis.tex")  # a link is someone's, not pgle's
    (project / "thesis.tex").write_text("mine too")
    before = snapshot(project)
    for argv in (["merge", str(a), str(b), "-o", str(out), "--force"],
                 ["convert", str(a), str(out), "--force"],
                 ["convert", str(a), str(out)]):
        line = refused(run_pgle(*argv, cwd=project), "would be lost", "notes.txt", "plots",
                       f"{FA}.pb")
        assert "3 entries" in line
    refused(run_pgle("merge", str(a), str(b), "-o", str(a), "--force", cwd=project), "is the input")
    assert snapshot(project) == before


def test_force_replaces_pgle_own_output(project):
    a, b = per_module(project / "a"), per_module(project / "b")
    out = project / "merged"
    assert run_pgle("merge", str(a), str(b), "-o", str(out), cwd=project).returncode == 0
    (out / "manifest.json").write_text("{}")  # a profile directory's manifest is pgle's too
    refused(run_pgle("merge", str(a), str(b), "-o", str(out), cwd=project),
            "already exists and is not empty")
    proc = run_pgle("merge", str(a), str(b), "-o", str(out), "--force", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    assert sorted(p.name for p in out.iterdir()) == [f"{FA}.pbtxt", f"{FB}.pbtxt"]
