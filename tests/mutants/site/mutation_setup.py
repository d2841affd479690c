"""The mutation run's set-up of each Python process (tests/mutants/score.py sets
PGLE_MUTATION_RUN), imported by this folder's sitecustomize and, in command mode, first thing by
the copy's `pgle/launch/boot/sitecustomize.py` (score.py `BOOT_PROLOGUE`): that one runs before
this folder's, and it imports the harness, whose trampolines must already record into the
stats pass's file. Imported once per process, so it runs once.

- `import pgle` must give mutmut's mutated copy (PGLE_MUTATION_RUN names its folder,
  `<copy>/mutants`), in the test process and in every `python -m pgle` subprocess: the
  developer's editable install (a setuptools finder, installed by a .pth file before this
  module runs) is taken out, and a finder for the copy goes first (mutmut 3.8 puts `mutants/`
  on sys.path, then takes it out again when the tests run from inside that folder). The copy
  holds `pgle/cli`, which the install maps from `cli/`.
- mutmut 3 runs the tests once with MUTANT_UNDER_TEST=stats to learn which tests reach which
  function; a `python -m pgle` subprocess inherits the variable, and its trampolines would try
  to record the hit in mutmut's state, which only the test process has: the subprocess records
  its hits in the file the test process names (subprocess_hits.py), or, without one, runs the
  unmutated code. With a mutant's name the variable stays: the subprocess runs that mutant, as
  the test process does."""

import os
import sys
from importlib.machinery import PathFinder


class _MutatedPgle:
    def __init__(self, root: str) -> None:
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "pgle":
            return None  # its submodules are found through pgle.__path__
        # The folder may not have existed when a path finder was first cached for it (mutmut
        # makes it after start-up): look again.
        sys.path_importer_cache.pop(self.root, None)
        return PathFinder.find_spec(fullname, [self.root])


if os.environ.get("PGLE_MUTATION_RUN"):
    sys.meta_path[:] = [_MutatedPgle(os.environ["PGLE_MUTATION_RUN"])] + [
        f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable___pgle")
    ]
    import subprocess_hits

    if os.environ.get("MUTANT_UNDER_TEST") == "stats" and os.environ.get("PGLE_MUTATION_HITS"):
        subprocess_hits.record_into(os.environ["PGLE_MUTATION_HITS"])
    elif os.environ.get("MUTANT_UNDER_TEST", "").startswith(subprocess_hits.HARNESS):
        if subprocess_hits.runs_harness_as_main():
            subprocess_hits.harness_as_main()
    elif os.environ.get("MUTANT_UNDER_TEST") in ("stats", "list_all_tests"):
        del os.environ["MUTANT_UNDER_TEST"]
