"""Every module imports on its own in a fresh interpreter: no import cycle, and nothing
but the code that runs inside the workload (pgle.launch.harness, pgle.launch.jax_internals)
imports jax at module import time (the CLI must start fast, DESIGN.md)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import pgle

# Modules allowed to import jax when imported: they run inside the workload's process.
JAX_SIDE = {"pgle.launch.jax_internals"}


def all_modules() -> list[str]:
    names = ["pgle"]
    for info in pkgutil.walk_packages(pgle.__path__, "pgle."):
        names.append(info.name)
    import importlib
    cli_pkg = importlib.import_module("pgle.cli")
    names += [f"pgle.cli.{i.name}" for i in pkgutil.iter_modules(cli_pkg.__path__)]
    return sorted(set(names))


def test_every_package_folder_is_found():
    mods = all_modules()
    for pkg in ("pgle.cli.main", "pgle.commands.collect", "pgle.evidence.xla_log",
                "pgle.verdicts.pgle_applied", "pgle.jobs.driver", "pgle.launch.harness",
                "pgle.profiles.files", "pgle.cache.entries", "pgle.xla.flags", "pgle.api",
                "pgle.jobs.layout", "pgle.launch.schema", "pgle.verdicts.across_ranks",
                "pgle.verdicts.auto_pgle", "pgle.cli.options", "pgle.cli.output"):
        assert pkg in mods


@pytest.mark.parametrize("module", all_modules())
def test_imports_alone_without_jax(module):
    code = (f"import sys, importlib; importlib.import_module({module!r}); "
            "print('jax' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if module not in JAX_SIDE:
        assert proc.stdout.strip() == "False", f"{module} imports jax at import time"
