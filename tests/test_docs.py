"""The documentation: a short README over docs/, nothing lost in the move, links that resolve, and a
CLI reference that matches `pgle <command> --help`."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
README_LIMIT = 10_000

# The README before it was split over docs/ (issue 11). Every section it had must still be
# somewhere: kept in README.md, or under docs/ with the same heading.
SPLIT_FROM = "218fd68"
OLD_README = REPO / "tests" / "data" / "readme-before-split.md"
OLD_HEADINGS = [
    "Set-up", "Commands", "`pgle collect`: profile and extract", "`pgle collect --per-module`",
    "`pgle run`: rerun with the profile and verify", "`pgle tune`: both phases, one verdict",
    "`pgle verify`: a verdict from a saved log", "Auto PGLE, the compilation cache and Nsight Systems",
    "`pgle auto`: JAX's auto PGLE in one run, verified per module",
    "`pgle prewarm` and `pgle nsys`: look at the PGLE-optimized program in Nsight Systems",
    "`pgle cache ls|stats|prune DIR`", "Testing auto PGLE and the cache without a GPU",
    "Profiles as data: `pgle inspect`, `pgle diff`, `pgle merge`, `pgle convert`",
    "`pgle inspect PROFILE`", "`pgle diff A B`", "`pgle merge PROFILE... -o OUT`", "`pgle convert IN OUT`",
    "Per-module profiles from a trace", "Profiles from Python", "Running on a cluster",
    "What rank 0 says, and what the others say", "Each command under `srun`", "Files", "Failures",
    "How pgle knows which rank it is", "Placeholders in output paths", "The job folder",
    "Before you launch a big job",
    "`pgle doctor [--workflow manual|auto|prewarm|nsys] [--cache-dir DIR] [--probe]`",
    "`pgle flags explain [\"XLA_FLAGS string\"] [--probe]`",
    "`pgle view RUN_FOLDER [--port 8791] [--host 127.0.0.1]`", "Verdicts", "Reports", "Exit codes",
    "Without a GPU", "Benchmarks", "Layout",
]
# A moved section may be trimmed a little, not rewritten.
MIN_KEPT = 0.9
# Sections rewritten on purpose since the split, with why (their old text was wrong).
REWRITTEN = {
    "Benchmarks": "issue 16: the old table described one-run scripts and stale goals; every "
                  "benchmark now runs through benchmarks/harness.py and its figures live in "
                  "docs/performance.md",
}
# Single lines of the old README that stopped being true; the rest of their section is still
# checked. Issue 16: pgle no longer sets PYTHONUNBUFFERED (a pseudo-terminal on a terminal).
RETIRED_LINES = {
    "The workload's output reaches the terminal live and unchanged (pgle sets `PYTHONUNBUFFERED=1` unless",
    "you set it, since the child writes into a pipe); pgle's own lines go to stderr with a `pgle:` "
    "prefix. `--json` prints one report on stdout (the workload's stdout then goes to stderr),",
    # Issue 21: the flag table now has every jax's defaults; the replays print captured lines.
    "in pgle's table), why, its meaning, its default (as jaxlib 0.10.2 has it) and the jax versions that",
    "lines (exact strings from XLA's source, both prefix styles) from a real JAX workload's stderr.",
}

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines, with fenced code blocks blanked (a `# comment` in a bash block is no heading);
    line numbers stay those of the text."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return out


def headings(text: str) -> list[tuple[int, str, int]]:
    """(level, text, line index) of every heading outside code blocks."""
    return [(len(m.group(1)), m.group(2), i) for i, line in enumerate(prose_lines(text))
            if (m := HEADING.match(line))]


def sections(text: str) -> dict[str, list[str]]:
    """heading text -> the non-blank lines up to the next heading of any level."""
    lines = text.splitlines()
    heads = headings(text)
    out: dict[str, list[str]] = {}
    for n, (_, title, start) in enumerate(heads):
        end = heads[n + 1][2] if n + 1 < len(heads) else len(lines)
        out[title] = [line.strip() for line in lines[start + 1:end] if line.strip()]
    return out


def github_anchor(title: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    title = re.sub(r"<[^>]+>", "", title).lower()
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, title, _ in headings(path.read_text()):
        slug = github_anchor(title)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def docs_sections() -> dict[str, tuple[Path, list[str]]]:
    out = {}
    for path in sorted(DOCS.rglob("*.md")):
        for title, body in sections(path.read_text()).items():
            out.setdefault(title, (path, body))
    return out


def test_readme_fits_the_limit():
    size = README.stat().st_size
    assert size <= README_LIMIT, (
        f"README.md is {size} bytes (limit {README_LIMIT}): move the detail to a page under docs/ "
        "and link it")


def test_readme_setup_commands_are_the_ones_ci_and_users_run():
    readme = README.read_text()
    lines = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()]
    ci_command = "python3 -m pip install -e '.[test]' && python3 -m pytest -q -n 2 --dist loadgroup"
    # .ci/run runs the command exactly as written, and stops when it fails (`|| fail ...`).
    runs = [i for i, ln in enumerate(lines) if ln.startswith(ci_command + " || fail ")]
    assert len(runs) == 1, "the README's test command must be exactly what .ci/run runs"
    assert ci_command in readme, "the README's test command must be exactly what .ci/run runs"
    # The XLA:GPU lane is CI's own step after it (docs/gpu-validation.md).
    lane = [i for i, ln in enumerate(lines) if ln.startswith("bash .ci/xla_gpu_tests.sh || fail ")]
    assert lane and lane[0] > runs[0]
    assert "pip install -e . && pgle tune examples/train.py" in readme
    assert (REPO / "examples" / "train.py").is_file()


@pytest.mark.parametrize("title", OLD_HEADINGS)
def test_every_old_readme_section_is_kept_or_under_docs(title):
    kept = {t for _, t, _ in headings(README.read_text())}
    moved = docs_sections()
    assert title in kept or title in moved, (
        f"README section {title!r} (README.md at {SPLIT_FROM}) is neither in README.md nor a heading "
        "under docs/")


def old_readme() -> str:
    """The README at SPLIT_FROM, kept as a file (tests/data/readme-before-split.md, written by
    `git show 218fd68:README.md`) so that a shallow clone or an sdist checks it too."""
    return OLD_README.read_text()


def test_old_readme_headings_are_the_listed_ones():
    # Guards OLD_HEADINGS itself: it is the full list of the old README's headings, title excepted.
    assert [t for _, t, _ in headings(old_readme())][1:] == OLD_HEADINGS


def moved_titles() -> list[str]:
    """The old sections now under docs/ (not kept in README.md, not rewritten on purpose)."""
    kept = {t for _, t, _ in headings(README.read_text())}
    return [t for t in OLD_HEADINGS if t not in kept and t not in REWRITTEN]


def test_rewritten_sections_are_old_sections():
    assert set(REWRITTEN) <= set(OLD_HEADINGS)


@pytest.mark.parametrize("title", moved_titles())
def test_moved_sections_keep_their_text(title):
    old = [line for line in sections(old_readme())[title] if line not in RETIRED_LINES]
    path, body = docs_sections()[title]
    # A link re-pointed from docs/ (`examples/` becomes `../../examples/`) loses nothing.
    def unlinked(line):
        return re.sub(r"\]\([^)]*\)", "]()", line)
    new_lines = {unlinked(line) for line in body}
    lost = [line for line in old if unlinked(line) not in new_lines]
    kept = 1 - len(lost) / len(old) if old else 1.0
    assert kept >= MIN_KEPT, (
        f"{path.relative_to(REPO)}, section {title!r}, keeps only {kept:.0%} of the old README's lines; "
        f"lost: {lost[:5]}")


def relative_links() -> list[tuple[Path, str]]:
    out = []
    for path in markdown_files():
        for line in prose_lines(path.read_text()):
            line = re.sub(r"`[^`]*`", "", line)  # `[x](y)` inside inline code is no link
            out.extend((path, target) for target in LINK.findall(line)
                       if not re.match(r"^[a-z][a-z0-9+.-]*:", target))
    return out


@pytest.mark.parametrize("path,target", relative_links(),
                         ids=lambda v: str(v.relative_to(REPO)) if isinstance(v, Path) else v)
def test_relative_links_resolve(path, target):
    file_part, _, anchor = target.partition("#")
    dest = (path.parent / file_part).resolve() if file_part else path
    where = f"{path.relative_to(REPO)}: link {target!r}"
    assert dest.exists(), f"{where} points at a missing file"
    assert REPO in dest.parents or dest == REPO, f"{where} leaves the repository"
    if anchor:
        assert dest.suffix == ".md", f"{where}: an anchor into a file that is not markdown"
        assert anchor in anchors(dest), f"{where}: no heading with that anchor in {dest.name}"


def test_links_are_found():
    # The link check above must see the README's links to docs/, or it checks nothing.
    targets = {t for p, t in relative_links() if p == README}
    assert "docs/reference/cli.md" in targets and "docs/guide/cluster.md" in targets


def gen_cli_reference():
    spec = importlib.util.spec_from_file_location("gen_cli_reference", DOCS / "gen_cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_current():
    gen = gen_cli_reference()
    current = gen.TARGET.read_text() if gen.TARGET.exists() else ""
    assert current == gen.render(), (
        f"docs/reference/cli.md no longer matches `pgle <command> --help`; regenerate it with: "
        f"{gen.REGENERATE}")


def test_cli_reference_covers_every_command():
    from pgle.cli.commands import COMMANDS

    text = (DOCS / "reference" / "cli.md").read_text()
    titles = {t for _, t, _ in headings(text)}
    missing = [name for name in COMMANDS if f"`pgle {name}`" not in titles]
    assert not missing, f"docs/reference/cli.md has no section for: {missing}"
    assert "`pgle cache prune`" in titles and "`pgle flags explain`" in titles


def test_cli_reference_check_fails_on_a_stale_file(tmp_path):
    gen = DOCS / "gen_cli_reference.py"
    stale = tmp_path / "cli.md"
    stale.write_text(gen_cli_reference().render().replace("--require-applied", "--require-aplied"))
    proc = subprocess.run([sys.executable, str(gen), "--check", "--output", str(stale)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert "regenerate it with: python3 docs/gen_cli_reference.py" in proc.stderr
    # Regenerating fixes it.
    subprocess.run([sys.executable, str(gen), "--output", str(stale)], check=True, capture_output=True)
    ok = subprocess.run([sys.executable, str(gen), "--check", "--output", str(stale)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


def test_report_fields_are_documented():
    import dataclasses

    from pgle.report import Report

    text = (DOCS / "reference" / "report.md").read_text()
    fields = [f.name for f in dataclasses.fields(Report) if f.name != "details"]
    undocumented = [name for name in fields if f"`{name}`" not in text]
    assert not undocumented, f"docs/reference/report.md does not name: {undocumented}"


def test_exit_codes_are_documented():
    from pgle import errors

    rows = {line.split("|")[1].strip() for line in (DOCS / "reference" / "exit-codes.md").read_text().splitlines()
            if line.startswith("| ")}
    codes = {str(getattr(errors, name)) for name in dir(errors) if name.startswith("EXIT_")}
    assert codes <= rows, f"exit codes without a row in docs/reference/exit-codes.md: {codes - rows}"


def gen_api_reference():
    spec = importlib.util.spec_from_file_location("gen_api_reference", DOCS / "gen_api_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_reference_is_current():
    gen = gen_api_reference()
    current = gen.TARGET.read_text() if gen.TARGET.exists() else ""
    assert current == gen.render(), (
        f"docs/reference/api.md no longer matches pgle/api.py; regenerate it with: "
        f"{gen.REGENERATE}")


def test_api_reference_covers_every_function_and_is_linked():
    from pgle import api

    text = (DOCS / "reference" / "api.md").read_text()
    titles = {t for _, t, _ in headings(text)}
    assert not [n for n in api.__all__ if f"`pgle.api.{n}`" not in titles]
    assert "docs/reference/api.md" in {t for p, t in relative_links() if p == README}


def test_api_reference_check_fails_on_a_stale_file(tmp_path):
    gen = DOCS / "gen_api_reference.py"
    stale = tmp_path / "api.md"
    stale.write_text(gen_api_reference().render().replace("min_coverage", "min_cover"))
    proc = subprocess.run([sys.executable, str(gen), "--check", "--output", str(stale)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1
    assert "regenerate it with: python3 docs/gen_api_reference.py" in proc.stderr
    subprocess.run([sys.executable, str(gen), "--output", str(stale)], check=True, capture_output=True)
    ok = subprocess.run([sys.executable, str(gen), "--check", "--output", str(stale)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
