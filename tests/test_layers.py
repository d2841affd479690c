"""The floor plan of docs/architecture.md ("Floors") as a test of the import graph: every import
of `pgle/` and `cli/` (inside functions and under TYPE_CHECKING too) goes to its own folder or
a lower floor, modules are imported by their own names, and `cli/` reaches the workflows only
through `pgle.api`. No exception is listed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ARCHITECTURE = REPO / "docs" / "architecture.md"
FLOOR_LINE = re.compile(r"^\s*(\d+)\s+(pgle[\w. ]*)$")

# What cli/ may import of pgle besides pgle.api and itself: what printing needs, never a
# command's work.
CLI_SURFACE = {
    "pgle.api",  # every command's work
    "pgle.errors",  # the exception family and exit codes it maps
    "pgle.report",  # the Report it renders
    "pgle.version",  # --version
    "pgle.units",  # sizes as tables print them
    "pgle.atomic",  # --report, written atomically
    "pgle.jobs.ranks",  # in a job: which rank prints --json, --report's rank placeholders
    "pgle.launch.streams",  # pgle's own stdout/stderr (closed or failing), as the launcher's
}


def floors(text: str | None = None) -> dict[str, int]:
    """Folder or module name -> its floor, from the fenced table in docs/architecture.md."""
    text = ARCHITECTURE.read_text() if text is None else text
    section = text.split("## Floors", 1)[1].split("\n## ", 1)[0]
    table = section.split("```text", 1)[1].split("```", 1)[0]
    plan: dict[str, int] = {}
    for line in table.splitlines():
        m = FLOOR_LINE.match(line)
        if m:
            for name in m.group(2).split():
                assert name not in plan, f"{name} is on two floors"
                plan[name] = int(m.group(1))
    return plan


def module_files() -> dict[str, Path]:
    """Every module of pgle/ and cli/ (installed as pgle.cli) by its dotted name."""
    out: dict[str, Path] = {}
    for root, prefix in ((REPO / "pgle", ["pgle"]), (REPO / "cli", ["pgle", "cli"])):
        for path in root.rglob("*.py"):
            parts = prefix + list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def room(module: str, plan: dict[str, int]) -> str | None:
    """The floor-plan entry a module belongs to: the longest entry that is it or holds it."""
    best = None
    for name in plan:
        if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best)):
            best = name
    return best


def imports_of(source: str, module: str, known: set[str]) -> list[tuple[int, str, str | None]]:
    """(line, imported pgle module, alias) for every import in `source`. `from P import N` is an
    import of P.N when that is a module, else of P."""
    is_package = module in {m.rsplit(".", 1)[0] for m in known if "." in m}
    out: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, a.asname) for a in node.names if a.name.split(".")[0] == "pgle"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                package = module if is_package else module.rsplit(".", 1)[0]
                package = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                base = f"{package}.{base}" if base else package
            if base.split(".")[0] != "pgle":
                continue
            for a in node.names:
                target = f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                out.append((node.lineno, target, a.asname if a.asname != a.name else None))
    return out


def violations(plan: dict[str, int], files: dict[str, Path]) -> tuple[list[str], list[str]]:
    """(imports that go up or across a floor, alias imports), as 'file:line: ...' lines."""
    known = set(files)
    up, aliases = [], []
    for module, path in sorted(files.items()):
        here = room(module, plan)
        where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        for line, target, alias in imports_of(path.read_text(), module, known):
            if alias is not None:
                aliases.append(f"{where}:{line}: imports {target} as {alias}")
            there = room(target, plan)
            if here is None or there is None or here == there:
                continue
            if plan[there] < plan[here]:
                up.append(f"{where}:{line}: {here} (floor {plan[here]}) imports {target} "
                          f"(floor {plan[there]}): up")
            elif plan[there] == plan[here]:
                up.append(f"{where}:{line}: {here} imports {target}: across floor {plan[here]}")
    return up, aliases


def test_every_module_is_on_a_floor():
    plan = floors()
    files = module_files()
    assert not [m for m in files if room(m, plan) is None]
    assert not [name for name in plan if not any(room(m, plan) == name for m in files)], \
        "the floor plan names something that no longer exists"


def test_no_import_goes_up_or_across():
    up, _ = violations(floors(), module_files())
    assert not up, "\n".join(up)


def test_modules_are_imported_by_their_own_names():
    _, aliases = violations(floors(), module_files())
    assert not aliases, "\n".join(aliases)


def test_cli_reaches_the_work_only_through_the_api():
    files = module_files()
    wrong = []
    for module, path in files.items():
        if not module.startswith("pgle.cli"):
            continue
        for line, target, _ in imports_of(path.read_text(), module, set(files)):
            if not (target.startswith("pgle.cli") or target in CLI_SURFACE):
                wrong.append(f"{path.relative_to(REPO)}:{line}: imports {target}")
    assert not wrong, "cli/ calls pgle.api only:\n" + "\n".join(wrong)


def import_circles(files: dict[str, Path]) -> list[list[str]]:
    """Every set of modules that import each other in a loop (Tarjan's strongly connected
    components over every import, lazy ones and those inside one folder included: the floor
    test above only sees imports between rooms)."""
    known = set(files)
    graph = {m: sorted({t for _, t, _ in imports_of(p.read_text(), m, known) if t in known and t != m})
             for m, p in files.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return circles


def test_no_import_circles():
    circles = import_circles(module_files())
    assert not circles, "modules that import each other:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_finder_finds_a_lazy_circle(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from pgle.analysis import b\n")
    b.write_text("def f():\n    from pgle.analysis import a\n")
    files = {**module_files(), "pgle.analysis.a": a, "pgle.analysis.b": b}
    assert ["pgle.analysis.a", "pgle.analysis.b"] in import_circles(files)


# -- the checker itself catches what it must ------------------------------------------------

@pytest.mark.parametrize("source, what", [
    ("from pgle.commands import run\n", "up"),
    ("def f():\n    from pgle.jobs.driver import Workflow\n", "up"),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pgle.api\n", "up"),
    ("from pgle.store import key\n", "across"),
    ("from pgle.profiles import files as profile\n", "alias"),
    ("import pgle.evidence.schema as events_schema\n", "alias"),
])
def test_the_checker_flags_a_bad_import(tmp_path, source, what):
    bad = tmp_path / "bad.py"
    bad.write_text(source)
    files = {**module_files(), "pgle.analysis.bad": bad}  # a module of pgle.analysis (floor 7)
    up, aliases = violations(floors(), files)
    found = [v for v in (aliases if what == "alias" else up) if "bad.py" in v]
    assert len(found) == 1 and (what == "alias" or what in found[0]), (source, found)


def test_the_floor_plan_is_read_from_the_page():
    plan = floors("## Floors\n\n```text\n 1     pgle.cli\n 2     pgle.api pgle.aot\n```\n")
    assert plan == {"pgle.cli": 1, "pgle.api": 2, "pgle.aot": 2}
