"""Performance figures are generated, never typed (issue 16): docs/performance.md's table is
exactly what benchmarks/run_all.py renders from benchmarks/results/*.json, every row points at
its JSON file, and no other doc carries a performance figure of its own."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import run_all  # noqa: E402
from benchmarks.harness import RESULTS  # noqa: E402

DOC = ROOT / "docs" / "performance.md"
# A ratio ("1.78×", "3.4x faster"), a throughput, or a min / median / max triple.
# "256 × 20,000" (a size) is not a ratio: a ratio's "×" follows the number and no number follows it.
FIGURE = re.compile(r"\d×(?!\s*\d)|\d(?:\.\d+)?\s*x\s+(?:faster|slower)|\d\s*[MG]B/s"
                    r"|\d+\.\d+ / \d+\.\d+ / \d+\.\d+")


def _table(text: str) -> str:
    start = text.index(run_all.BEGIN) + len(run_all.BEGIN)
    return text[start:text.index(run_all.END)].strip()


def test_table_is_generated_from_the_result_files():
    assert _table(DOC.read_text()) == run_all.render_table().strip(), \
        "docs/performance.md is stale or edited by hand: run `python benchmarks/run_all.py --table`"


def test_every_row_points_at_its_result():
    rows = [r for r in _table(DOC.read_text()).splitlines()[2:] if r.startswith("|")]
    assert rows, "the table has no figures"
    for row in rows:
        m = re.search(r"\(\.\./benchmarks/results/(bench_\w+)\.json\) `(\w+)`", row)
        assert m, f"row without a pointer to its JSON result: {row}"
        doc = json.loads((RESULTS / f"{m.group(1)}.json").read_text())
        fig = {f["key"]: f for f in doc["figures"]}[m.group(2)]
        assert fig["value"]["min"] <= fig["value"]["median"] <= fig["value"]["max"]
        assert doc["machine"]["cores"] and doc["machine"]["load_start"] and doc["machine"]["load_end"]


def test_results_follow_the_method():
    for path in RESULTS.glob("bench_*.json"):
        doc = json.loads(path.read_text())
        for fig in doc["figures"]:
            pairs = fig["details"].get("pairs") or fig["details"].get("slowest", {}).get("pairs")
            if fig["unit"] == "x":
                assert pairs and pairs >= 5, f"{path.name} {fig['key']}: fewer than 5 pairs"


def test_no_hand_typed_figures_outside_the_performance_page():
    offenders = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if path == DOC:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if FIGURE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    # Outside this page, figures below the generated table are also checked.
    rest = DOC.read_text().replace(_table(DOC.read_text()), "")
    for n, line in enumerate(rest.splitlines(), 1):
        if FIGURE.search(line) and "goal" not in line.lower() and "<=" not in line and ">=" not in line:
            offenders.append(f"docs/performance.md (outside the table):{n}: {line.strip()}")
    assert not offenders, "performance figures typed by hand (put them in a benchmark):\n" + \
        "\n".join(offenders)
