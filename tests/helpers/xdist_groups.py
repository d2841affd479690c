"""Which tests share a pytest-xdist worker (the README's `-n 2 --dist loadgroup`).

A plugin of its own (named in tests/conftest.py's `pytest_plugins`) so that
tests/test_xdist_groups.py can load it into a pytest run of a generated module.
"""

from __future__ import annotations

import pytest


# tryfirst: xdist's own modifyitems turns each `xdist_group` mark into the node id's `@group`
# suffix, which is what loadgroup schedules by. A hook that ran after it (the default order for
# a conftest: pytest-xdist 3.x) added marks nobody read: every module fixture ran once per
# worker, the doc recipes' workload runs (~150 s) twice.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (the README's `-n 2 --dist loadgroup`): every test that uses the
    one-node SLURM cluster runs on one worker, one job at a time (the node's CPUs are few, and a
    second worker's job would wait in the queue past the test's deadline); the tests of a module
    with a module-scoped fixture (the doc recipes' workload runs, a served trace) stay on one
    worker, so that fixture runs once, not once per worker."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "slurm_cluster" in names:
            item.add_marker(pytest.mark.xdist_group("slurm"))
            continue
        defs = getattr(item, "_fixtureinfo", None)
        defs = defs.name2fixturedefs if defs is not None else {}
        if any(d.scope == "module" for n in names for d in defs.get(n, ())):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
