"""`pgle cache ls DIR --json` over a cache of 10,000 entries against `ls -l DIR`, whole processes.

The cache directory is shaped like JAX's (`<module>-<64 hex>-cache`, half of them with `-atime`
files as under a size cap, 200 modules) with a pgle manifest that names a third of the keys.

The anchor is `ls -l` of the same directory: what a user types to see a cache today, and the
least a listing with sizes and dates does (one `stat` per file, sorted, formatted). pgle does
that much plus grouping files into entries, reading the manifest's roles and totalling; its
side runs as the user runs it (interpreter start-up and imports included, as `ls` pays its
own). Both through the harness (benchmarks/harness.py): alternating pairs, per-pair ratios.
The old script's goal, the CLI under 1 s on 10,000 entries, is kept as a second row.
Writes benchmarks/results/bench_cache_ls.json.
Runtime: ~1 minute on 2 cores (development estimate).

    python benchmarks/bench_cache_ls.py [--entries 10000] [--pairs 7] [--dir DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402


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


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--dir", default=None, help="where to build the cache (default: a temp dir)")
    args = ap.parse_args()
    rec = h.Recorder("bench_cache_ls")
    env = h.python_env()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        d = Path(tmp) / "cache"
        d.mkdir()
        build(d, args.entries)
        argv = h.pgle_argv("cache", "ls", str(d), "--json")
        got = json.loads(subprocess.run(argv, env=env, capture_output=True, check=True).stdout)
        if got["total"]["entries"] != args.entries:
            raise SystemExit(f"pgle cache ls saw {got['total']['entries']} entries, not {args.entries}")
        res = h.compare(h.Side("ls -l", ["ls", "-l", str(d)], env=env),
                        h.Side("pgle cache ls --json", argv, env=env), pairs=args.pairs)
    rec.figure("cache_ls", what=f"`pgle cache ls --json`, {args.entries:,} entries",
               anchor="`ls -l` of the cache folder", goal="–", value=res["ratio"], met=None,
               details=res)
    rec.figure("cache_ls_seconds", what=f"`pgle cache ls --json`, {args.entries:,} entries (whole process)",
               anchor="–", goal="< 1 s", unit="s", value=res["subject_s"],
               met=res["subject_s"]["median"] < 1.0, details=res)
    rec.write()


if __name__ == "__main__":
    main()
