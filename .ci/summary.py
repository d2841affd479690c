"""CI summary: what each step ran, passed, failed and skipped, from the JUnit XML files pytest
wrote (PYTEST_ADDOPTS=--junitxml=... in .ci/run, so the README's test command stays exactly as
written). Every skip must match a reason listed in .ci/allowed-skips (one regular expression per
line, each explained in docs/development.md, "What CI skips, and why"); any other skip, or a step
whose XML is missing (the step never ran), fails the run.

Usage: python3 .ci/summary.py ALLOWED STEP=FILE.xml [STEP=FILE.xml ...]
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(argv: list[str]) -> int:
    allowed = [re.compile(line) for line in Path(argv[0]).read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    bad = 0
    print("ci: summary")
    for arg in argv[1:]:
        step, _, file = arg.partition("=")
        path = Path(file)
        if not path.is_file():
            print(f"ci:   {step}: NO RESULTS ({path} missing: the step did not run)")
            bad += 1
            continue
        counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
        skips: list[str] = []
        for case in ET.parse(path).getroot().iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            if case.find("failure") is not None:
                counts["failed"] += 1
            elif case.find("error") is not None:
                counts["errors"] += 1
            elif (skip := case.find("skipped")) is not None:
                if skip.get("type") == "pytest.xfail":
                    counts["failed"] += 1  # no xfail is expected in this suite
                    continue
                counts["skipped"] += 1
                skips.append(f"{name}: {skip.get('message', '')}")
            else:
                counts["passed"] += 1
        print(f"ci:   {step}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
        bad += counts["failed"] + counts["errors"]
        if counts["passed"] == 0:
            print(f"ci:     {step} passed no test")
            bad += 1
        for s in skips:
            ok = any(p.search(s) for p in allowed)
            print(f"ci:     skipped{'' if ok else ' (NOT ALLOWED)'}: {s}")
            bad += not ok
    print("ci: " + ("OK" if not bad else f"FAILED ({bad} problem(s) above)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
