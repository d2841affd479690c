"""What the test-only sitecustomize helpers share: patch a module right after it is imported,
and run the sitecustomize they shadow. Loaded by file path, so it adds nothing to sys.path."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, patch):
        self._inner, self._patch = inner, patch

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, target, patch):
        self._target, self._patch = target, patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self._target:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, self._patch)
        return spec


def patch_after_import(target: str, patch) -> None:
    """Call `patch(module)` once `target` is imported (now, if it already is)."""
    if target in sys.modules:
        patch(sys.modules[target])
    else:
        sys.meta_path.insert(0, _Finder(target, patch))


def chain_next_sitecustomize(this_file: str) -> None:
    """Run the sitecustomize `this_file` shadows, if any, so the environment stays as it was."""
    # Only the entries after this one: two helpers on PYTHONPATH would otherwise chain to
    # each other forever (RecursionError in every process).
    here = os.path.dirname(os.path.abspath(this_file))
    entries = [os.path.abspath(p or ".") for p in sys.path]
    rest = sys.path[entries.index(here) + 1:] if here in entries else sys.path
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and spec.origin != os.path.abspath(this_file):
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
