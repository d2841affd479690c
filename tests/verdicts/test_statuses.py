"""Statuses are `enum.StrEnum`s (pgle/verdicts/statuses.py) whose values are the strings the
reports always carried: the JSON of a report is unchanged, and every status pgle's verdict
code writes is a member."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pgle.report import Report
from pgle.verdicts import statuses
from pgle.verdicts.statuses import Applied, Collected, Loaded, Optimized, Written

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
VALUES = {m.value for cls in statuses.ALL for m in cls}
# The verdicts, and the commands that write a verdict's or a profile's status.
VERDICT_CODE = [*sorted((REPO / "pgle" / "verdicts").glob("*.py"))] + [
    REPO / "pgle" / "commands" / f"{name}.py"
    for name in ("run", "verify", "tune", "collect", "collect_job", "extract", "auto",
                 "prewarm", "nsys", "compare", "report")
]


def test_values_are_todays_strings():
    # The wire format: what --json, report.json and the job folders have always held.
    assert [m.value for m in Applied] == [
        "applied", "partial", "not_applied", "not_applicable", "error"]
    assert [m.value for m in Optimized] == ["optimized", "not_optimized", "empty_profile"]
    assert [m.value for m in Loaded] == ["loaded_optimized", "fell_back", "compiled_anew"]
    assert [m.value for m in Collected] == [
        "collected", "partial", "empty", "failed", "not_profiled"]
    assert [m.value for m in Written] == ["written", "no fingerprint", "pooled"]


@pytest.mark.parametrize("member", [m for cls in statuses.ALL for m in cls])
def test_a_member_reads_and_writes_as_its_string(member):
    assert json.dumps(member) == json.dumps(member.value)
    assert f"{member}" == str(member) == member.value
    assert member == member.value and hash(member) == hash(member.value)


def test_the_json_of_a_report_is_unchanged():
    with_enums = Report("verify", Applied.PARTIAL,
                        modules=[{"module": "jit_a", "status": Applied.APPLIED},
                                 {"module": "jit_b", "status": Applied.NOT_APPLIED}])
    with_strings = Report("verify", "partial",
                          modules=[{"module": "jit_a", "status": "applied"},
                                   {"module": "jit_b", "status": "not_applied"}])
    assert json.dumps(with_enums.to_dict()) == json.dumps(with_strings.to_dict())


def _verify_json(log: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "pgle", "verify", "--json", str(log)],
                          capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def test_a_real_verdicts_json_holds_the_plain_strings():
    logs = sorted(DATA.glob("xla_gpu/*/sync-converted.log"))
    assert logs, "the lane's captured logs are part of the repository"
    report = _verify_json(logs[-1])
    assert report["status"] in {m.value for m in Applied}
    assert report["modules"] and all(
        type(m["status"]) is str and m["status"] in {a.value for a in Applied}
        for m in report["modules"])


def _status_strings(path: Path) -> list[tuple[int, str]]:
    """String constants the module writes as a status or compares a status with."""
    found: list[tuple[int, str]] = []

    def is_status(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id == "status" or node.id.endswith("_status")
        if isinstance(node, ast.Attribute):
            return node.attr == "status"
        if isinstance(node, ast.Subscript):
            return isinstance(node.slice, ast.Constant) and node.slice.value == "status"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return (node.func.attr == "get" and bool(node.args)
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value == "status")
        return False

    def strings(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [s for e in node.elts for s in strings(e)]
        if isinstance(node, ast.IfExp):
            return strings(node.body) + strings(node.orelse)
        if isinstance(node, ast.BoolOp):
            return [s for v in node.values for s in strings(v)]
        return []

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and any(is_status(t) for t in node.targets):
            found += [(node.lineno, s) for s in strings(node.value)]
        elif isinstance(node, ast.Compare) and (
                is_status(node.left) or any(is_status(c) for c in node.comparators)):
            for side in [node.left, *node.comparators]:
                found += [(node.lineno, s) for s in strings(side)]
        elif isinstance(node, ast.keyword) and node.arg == "status":
            found += [(node.value.lineno, s) for s in strings(node.value)]
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "status" and v is not None:
                    found += [(v.lineno, s) for s in strings(v)]
    return found


def test_the_scan_sees_bare_status_strings(tmp_path):
    # The scan below proves something only if it finds bare strings where they are.
    probe = tmp_path / "probe.py"
    probe.write_text('row["status"] = "aplied"\nif r.get("status") == "colected": pass\n'
                     'report.status = "ok" if x else "x"\nReport("c", "p", status="q")\n')
    assert sorted(s for _, s in _status_strings(probe)) == ["aplied", "colected", "ok", "q", "x"]


def test_every_status_the_verdict_code_writes_is_a_member():
    unknown = [f"{path.relative_to(REPO)}:{line}: {text!r}"
               for path in VERDICT_CODE for line, text in _status_strings(path)
               if text not in VALUES]
    assert not unknown, "statuses outside pgle/verdicts/statuses.py:\n" + "\n".join(unknown)
