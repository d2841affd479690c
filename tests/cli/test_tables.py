"""Every table pgle prints lines up (one renderer, cli/output.py `table`), names from shared
folders included (their control characters shown escaped, and measured as shown), and counts
are words ("1 entry", never "1 entries")."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from helpers.pgle_testing import pgle_lines, run_pgle
from pgle.phrases import listed, plural

H = "0123456789abcdef" * 4  # a cache key's 64 hex
REFERENCE = Path(__file__).resolve().parent.parent / "data" / "nsys" / "pgle_costs_reference"


def aligned(lines: list[str], right: set[str] = frozenset()) -> None:
    """Each column of the header line starts (left-aligned) or ends (`right`) where its cells do."""
    header, *rows = lines
    names = re.findall(r"\S+(?: \S+)*", header)  # columns are two spaces apart
    assert rows, lines
    for name in names[:-1]:
        start = header.index(name)
        for row in rows:
            if name in right:
                end = start + len(name)
                assert row[end - 1] != " " and row[end:end + 2] == "  ", (name, header, row)
            else:
                assert row[start - 2:start] in ("  ", "") and row[start] != " ", (name, header, row)


def test_runs_ls_lines_up_with_a_name_that_holds_an_escape(project):
    root = project / ".pgle" / "runs"
    for name in ("20260101-000001-collect-1", "20260101-000002-run\x1b[31m-2"):
        (root / name).mkdir(parents=True)
        (root / name / "workload.log").write_bytes(b"x" * 2000)
        t = time.time() - 3600
        os.utime(root / name / "workload.log", (t, t))
    proc = run_pgle("runs", "ls", cwd=project)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert lines[0].split() == ["RUN", "SIZE", "MODIFIED", "IN", "USE"]
    # A name with an escape is no run folder pgle made (issue 31: the name pattern): it is
    # neither listed nor printed raw anywhere.
    assert "\x1b" not in proc.stdout.decode() + proc.stderr.decode()
    assert [line.split()[0] for line in lines[1:]] == ["20260101-000001-collect-1"]
    aligned(lines, right={"SIZE"})


def cache_dir(tmp_path: Path) -> Path:
    d = tmp_path / "cache"
    d.mkdir()
    for module, n, size in (("jit_train_step_with_a_long_name", 1, 123456), ("jit_init", 2, 10)):
        (d / f"{module}-{H[:-2]}{n:02x}-cache").write_bytes(b"x" * size)
    return d


def test_cache_ls_and_stats_line_up(tmp_path):
    d = cache_dir(tmp_path)
    ls = run_pgle("cache", "ls", str(d), cwd=tmp_path)
    assert ls.returncode == 0, ls.stderr.decode()
    entries, totals = ls.stdout.decode().split("\n\n")
    aligned(entries.splitlines(), right={"SIZE"})
    aligned(totals.splitlines(), right={"ENTRIES", "SIZE"})
    stats = run_pgle("cache", "stats", str(d), cwd=tmp_path)
    roles, modules = stats.stdout.decode().split("\n\n")
    aligned(roles.splitlines(), right={"ENTRIES", "SIZE"})
    aligned(modules.splitlines(), right={"ENTRIES", "SIZE"})


def test_one_entry_is_an_entry(tmp_path):
    d = tmp_path / "cache"
    d.mkdir()
    (d / f"jit_f-{H}-cache").write_bytes(b"x")
    proc = run_pgle("cache", "prune", str(d), "--module", "jit_f", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    assert any("would delete 1 of 1 entry (1 B); dry run" in line for line in pgle_lines(proc))
    proc = run_pgle("cache", "ls", str(d), cwd=tmp_path)
    assert "pgle: 1 entry, 1 B, 1 module in" in pgle_lines(proc)[0]


def test_store_ls_lines_up(tmp_path):
    store = tmp_path / "store"
    add = run_pgle("store", "add", str(store), str(REFERENCE), "--device-kind", "NVIDIA H100",
                   "--jax", "0.10.2", cwd=tmp_path)
    assert add.returncode == 0, add.stderr.decode()
    proc = run_pgle("store", "ls", str(store), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    aligned(proc.stdout.decode().splitlines(), right={"INSTR", "AGE"})


def test_plural():
    assert [plural(n, "entry") for n in (0, 1, 2)] == ["0 entries", "1 entry", "2 entries"]
    assert plural(1, "module profile") == "1 module profile"
    assert plural(3, "pass") == "3 passes" and plural(2, "day") == "2 days"
    assert plural(2, "collective or host copy", "collectives or host copies").endswith("copies")


def test_listed_names_the_first_ones_and_counts_the_rest():
    names = [f"m{i}" for i in range(10)]
    assert listed(names[:8]) == "m0, m1, m2, m3, m4, m5, m6, m7"
    assert listed(names) == "m0, m1, m2, m3, m4, m5, m6, m7 and 2 more"
    assert listed(names, 6) == "m0, m1, m2, m3, m4, m5 and 4 more"
    assert listed([]) == ""
