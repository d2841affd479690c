"""Profile-store lookup: one module's profile from a store of 10,000 vs one of 10.

Builds two local stores (10,000 and 10 module profiles of 200 instructions, jax 0.10.2, H100),
then times whole processes that open the store and serve one module (`ProfileStore.serve`, what
`pgle store get --fingerprint`-style lookups and `--store` runs do per module), alternating the
order pair by pair. Prints per-process times and the min/median/max of the per-pair ratios
(large / small): the cost of store size on a lookup. Then times whole processes that build the
view XLA reads (`materialize`: one listing, metadata reads, hard links) of the large store and of
the small one, alternating, and reports min/median/max per process and per-pair ratios.

    python benchmarks/bench_store.py [--profiles 10000] [--pairs 7]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pgle.profiles.files import Profile  # noqa: E402
from pgle.store.store import ProfileStore  # noqa: E402

LOOKUP = ("import sys; sys.path.insert(0, {root!r}); from pgle.store.store import ProfileStore; "
          "p, _ = ProfileStore({store!r}).serve({fp!r}, jax='0.10.2', device_kind='H100'); "
          "assert p.instruction_count == 200")


def build(path: Path, n: int) -> str:
    st = ProfileStore(path, create=True)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    for i in range(n):
        st.add(f"{i:032x}", Profile([(f"fusion.{k}", float(k + i)) for k in range(200)]), jax="0.10.2",
               jaxlib="0.10.2", device_kind="H100", device_count=8, source="bench", now=now)
    return f"{n // 2:032x}"


def timed(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiles", type=int, default=10_000)
    ap.add_argument("--pairs", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        big_fp = build(Path(tmp) / "big", args.profiles)
        small_fp = build(Path(tmp) / "small", 10)
        print(f"built stores of {args.profiles} and 10 profiles in {time.perf_counter() - t0:.1f} s")
        big = LOOKUP.format(root=str(ROOT), store=f"{tmp}/big", fp=big_fp)
        small = LOOKUP.format(root=str(ROOT), store=f"{tmp}/small", fp=small_fp)
        ratios, tb, ts = [], [], []
        for i in range(args.pairs):
            if i % 2:
                s, b = timed(small), timed(big)
            else:
                b, s = timed(big), timed(small)
            tb.append(b)
            ts.append(s)
            ratios.append(b / s)
        print(f"lookup, store of {args.profiles}: median {statistics.median(tb) * 1000:.0f} ms "
              f"(min {min(tb) * 1000:.0f}, max {max(tb) * 1000:.0f})")
        print(f"lookup, store of 10: median {statistics.median(ts) * 1000:.0f} ms "
              f"(min {min(ts) * 1000:.0f}, max {max(ts) * 1000:.0f})")
        print(f"ratio large/small over {args.pairs} pairs: min {min(ratios):.2f} "
              f"median {statistics.median(ratios):.2f} max {max(ratios):.2f}")
        view = ("import sys; sys.path.insert(0, {root!r}); from pgle.store.store import ProfileStore; "
                "s = ProfileStore({store!r}).materialize({out!r}, jax='0.10.2', device_kind='H100', "
                "force=True); assert len(s) == {n}")
        vb, vs, vr = [], [], []
        for i in range(args.pairs):
            big_v = view.format(root=str(ROOT), store=f"{tmp}/big", out=f"{tmp}/vb{i}", n=args.profiles)
            small_v = view.format(root=str(ROOT), store=f"{tmp}/small", out=f"{tmp}/vs{i}", n=10)
            if i % 2:
                s, b = timed(small_v), timed(big_v)
            else:
                b, s = timed(big_v), timed(small_v)
            vb.append(b)
            vs.append(s)
            vr.append(b / s)
        print(f"view of {args.profiles} modules (whole process): median {statistics.median(vb):.2f} s "
              f"(min {min(vb):.2f}, max {max(vb):.2f})")
        print(f"view of 10 modules (whole process): median {statistics.median(vs):.2f} s "
              f"(min {min(vs):.2f}, max {max(vs):.2f})")
        print(f"view ratio large/small over {args.pairs} pairs: min {min(vr):.1f} "
              f"median {statistics.median(vr):.1f} max {max(vr):.1f}")


if __name__ == "__main__":
    main()
