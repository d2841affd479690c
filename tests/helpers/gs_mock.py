"""A gs:// bucket mapped onto a local folder with etils' own `epath.testing.mock_epath`: the
store's and the cache's remote branches run etils' real code on real files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def mock_gs(bucket: Path) -> Any:
    """The context manager under which `gs://X` is `bucket/X`."""
    from etils.epath import testing

    def local(p: Any) -> str:
        p = os.fspath(p)
        return str(bucket / p[len("gs://"):]) if p.startswith("gs://") else p

    def wrap(name: str) -> Any:
        return lambda orig, p, *a, **k: orig(local(p), *a, **k)

    def wrap2(name: str) -> Any:
        return lambda orig, a, b, *r, **k: orig(local(a), local(b), *r, **k)

    mocks = {n: wrap(n) for n in ("open", "exists", "isdir", "listdir", "makedirs", "mkdir",
                                  "remove", "rmtree", "stat", "walk")}
    mocks.update({n: wrap2(n) for n in ("rename", "replace", "copy")})
    mocks["glob"] = lambda orig, p: ["gs://" + os.path.relpath(x, bucket) for x in orig(local(p))]
    return testing.mock_epath(**mocks)
