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
                "pgle.jobs.layout", "pgle.evidence.schema", "pgle.verdicts.across_ranks",
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


HEAVY = ("etils", "google.protobuf", "numpy", "jax")


def _imported_after(argv: list[str], tmp_path, heavy=HEAVY) -> set[str]:
    """Heavy top-level packages a `pgle` command leaves in sys.modules (issue 16: start-up
    imports only what the path needs)."""
    code = ("import atexit, sys, json\n"
            "out = sys.argv[1]\n"
            "atexit.register(lambda: open(out, 'w').write(json.dumps(sorted(sys.modules))))\n"
            "sys.argv = ['pgle'] + sys.argv[2:]\n"
            "from pgle.cli.main import main\nmain()\n")
    out = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", code, str(out), *argv], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json
    loaded = json.loads(out.read_text())
    return {h for h in heavy if any(m == h or m.startswith(h + ".") for m in loaded)}


def test_help_imports_neither_jax_nor_etils_nor_protobuf(tmp_path):
    # click renders --help (issue 24); each command's module is imported, nothing heavier.
    from pgle.cli.commands import COMMANDS

    assert _imported_after(["--help"], tmp_path) == set()
    for command in sorted(COMMANDS):
        assert _imported_after([command, "--help"], tmp_path) == set(), command


def test_local_profile_commands_import_nothing_heavy(tmp_path):
    # Local profiles: no etils (local paths), no jax, and convert skips the trace/Nsight
    # converters. protobuf and numpy are the readers' own (issue 35: one reader per layout,
    # whatever the size; start-up milliseconds do not justify a second one).
    from pgle.profiles.files import Profile, write_profile

    write_profile(Profile([("fusion.1", 1.0)], [("a", "b", 2.0)]), tmp_path / "a.pbtxt")
    write_profile(Profile([("fusion.1", 2.0), ("all-reduce-start.1", 0.5)]), tmp_path / "b.pb")
    light = ("etils", "jax")
    assert _imported_after(["inspect", str(tmp_path / "a.pbtxt")], tmp_path, light) == set()
    assert _imported_after(["inspect", str(tmp_path / "b.pb")], tmp_path, light) == set()
    assert _imported_after(["diff", str(tmp_path / "a.pbtxt"), str(tmp_path / "b.pb")], tmp_path,
                           light) == set()
    converters = ("pgle.profiles.convert", "pgle.profiles.nsys_convert", "pgle.profiles.nsys")
    assert _imported_after(["convert", str(tmp_path / "b.pb"), str(tmp_path / "c.pbtxt")], tmp_path,
                           light + converters) == set()
    assert (tmp_path / "c.pbtxt").read_text().startswith('costs {\n  name: "fusion.1"\n')


def test_run_imports_only_its_own_workflow(tmp_path):
    # `pgle run` is the per-launch fixed cost users pay on every job (issue 16: <= 0.3 s):
    # pgle.api imports each workflow's module on first use, so run loads none of auto's,
    # prewarm's, nsys's or collect's imports, and a text profile in pgle's layout needs no
    # protobuf (numpy reads it: canonical.text_columns).
    from pgle.profiles.files import Profile, write_profile

    write_profile(Profile([("fusion.1", 1.0)]), tmp_path / "p.pbtxt")
    (tmp_path / "w.py").write_text("print('a workload that never imports jax')\n")
    others = tuple(f"pgle.commands.{c}" for c in ("auto", "prewarm", "nsys", "collect", "tune"))
    loaded = _imported_after(["run", "--profile", str(tmp_path / "p.pbtxt"), "--run-dir",
                              str(tmp_path / "runs"), str(tmp_path / "w.py")], tmp_path,
                             ("etils", "google.protobuf", "jax") + others)
    assert loaded == set()


def test_verify_imports_no_workflow_machinery(tmp_path):
    # `pgle verify` reads a saved log: it goes through pgle.api like every command, and
    # pgle.api imports the job driver, the launcher and the other workflows only on first use.
    (tmp_path / "w.log").write_text("a log without any XLA line\n")
    machinery = ("pgle.jobs.driver", "pgle.launch.launcher", "pgle.commands.run",
                 "pgle.commands.collect", "pgle.commands.auto")
    assert _imported_after(["verify", str(tmp_path / "w.log")], tmp_path,
                           HEAVY + machinery) == set()
