"""`pgle cache ls` over a cache of 10,000 entries, against `ls -l` on the same directory.

Builds a cache directory shaped like JAX's (`<module>-<64 hex>-cache`, half of
them with `-atime` files as under a size cap, 200 modules) with a pgle manifest
that names a third of the keys, then times, best of --repeat runs each:
  1. `pgle cache ls DIR --json` as a user runs it (a new process: start-up included);
  2. `pgle.cache.entries.ls(DIR)` in-process (listing + manifest roles + totals);
  3. `ls -l DIR` (one stat per file, like pgle).
Goal: the CLI under 1 s. Prints the numbers and the ratios to `ls -l`.

    python benchmarks/bench_cache_ls.py [--entries 10000] [--repeat 5] [--dir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def build(d: Path, entries: int) -> None:
    from pgle.cache import manifest as cache_manifest

    manifest = cache_manifest.empty()
    for i in range(entries):
        module = f"jit_step_{i % 200}"
        key = f"{module}-{hashlib.sha256(str(i).encode()).hexdigest()}"
        (d / f"{key}-cache").write_bytes(b"\0" * (1000 + i % 5000))
        if i % 2:
            (d / f"{key}-atime").write_bytes(time.time_ns().to_bytes(8, "little"))
        if i % 3 == 0:
            role = cache_manifest.ROLE_PGLE_OPTIMIZED if i % 6 == 0 else cache_manifest.ROLE_FIRST_PASS
            cache_manifest.record_keys(manifest, module, role, [key])
    (d / cache_manifest.MANIFEST_NAME).write_text(json.dumps(manifest))


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where to build the cache (default: a temp dir)")
    args = ap.parse_args()

    from pgle.cache import entries as cache

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        d = Path(tmp) / "cache"
        d.mkdir()
        build(d, args.entries)
        files = len(os.listdir(d))

        def cli():
            out = subprocess.run([sys.executable, "-m", "pgle", "cache", "ls", str(d), "--json"],
                                 cwd=ROOT, capture_output=True, check=True).stdout
            assert json.loads(out)["total"]["entries"] == args.entries

        def library():
            assert len(cache.ls(str(d)).details["entries"]) == args.entries

        def ls_l():
            subprocess.run(["ls", "-l", str(d)], capture_output=True, check=True)

        t_cli, t_lib, t_ls = best(cli, args.repeat), best(library, args.repeat), best(ls_l, args.repeat)
    print(f"cache of {args.entries} entries ({files} files), best of {args.repeat}:")
    print(f"  pgle cache ls --json (new process): {t_cli * 1000:8.1f} ms   ratio to ls -l: {t_cli / t_ls:5.1f}x")
    print(f"  pgle.cache.entries.ls() in-process:         {t_lib * 1000:8.1f} ms   ratio to ls -l: {t_lib / t_ls:5.1f}x")
    print(f"  ls -l:                              {t_ls * 1000:8.1f} ms")
    print(f"  goal (< 1 s for the CLI): {'met' if t_cli < 1.0 else 'MISSED'}")


if __name__ == "__main__":
    main()
