"""pgle's harness, by environment: `pgle CMD -- bash run.sh` (any command) puts this folder first
on the command's PYTHONPATH, so every Python process the command starts imports it at start-up
(Python's `site` imports the first `sitecustomize` on sys.path).

In each such process it (1) starts the harness's watch of pgle (a process group whose pgle died
is killed) and, once the process imports jax, the harness itself (pgle.launch.harness
`activate`): a shell, `torchrun` or any Python process that never imports jax is left alone;
then (2) runs the `sitecustomize` this one shadows, if any (the user's, the distribution's), so
the environment stays as it was. `usercustomize` is imported by `site` itself, after this.

pgle's own package is loaded from where pgle runs (PGLE_HARNESS_ROOT), whatever the command's
Python has installed, and without putting that folder on sys.path.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _load_pgle() -> None:
    if "pgle" in sys.modules:
        return
    root = os.environ.get("PGLE_HARNESS_ROOT")
    init = os.path.join(root, "pgle", "__init__.py") if root else None
    if not init or not os.path.isfile(init):
        return  # `import pgle` below finds the installed one, if any
    spec = importlib.util.spec_from_file_location(
        "pgle", init, submodule_search_locations=[os.path.dirname(init)]
    )
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["pgle"] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules["pgle"]


def _activate() -> None:
    spec_path = os.environ.get("PGLE_HARNESS_SPEC")
    if not spec_path:
        return
    try:
        _load_pgle()
        from pgle.launch import harness
    except Exception as e:  # the workload runs unobserved rather than not at all
        sys.stderr.write(
            f"pgle: warning: the harness could not start in this process "
            f"({type(e).__name__}: {e})\n"
        )
        return
    harness.activate(spec_path)


def _chain() -> None:
    """Run the sitecustomize this file shadows (the next one on sys.path)."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_activate()
_chain()
