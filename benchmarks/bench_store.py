"""The profile store: `pgle store get` (the view XLA reads) and one module's lookup, whole processes.

Builds a local store of --profiles module profiles (200 instructions each, jax 0.10.2, H100),
one entry per module, and a store of 10. Two figures, both through the harness
(benchmarks/harness.py: alternating pairs, per-pair ratios):

- `store_get`: `pgle store get STORE OUT --device-kind H100 --jax 0.10.2 --force` against a
  `python -c` that does the least any view of this store must do, written by hand: list
  `profiles/`, read each entry's metadata JSON to keep the jax version and device kind asked
  for, take the newest per module, and hard-link its profile as `OUT/<fingerprint>.pbtxt`.
  pgle does that plus its policy, the store's checks and an atomic replace of OUT; the ratio
  is the price of those.
- `store_lookup`: serving one module (`ProfileStore.serve`, what a `--store` run does per
  module) from the large store against the same lookup in the store of 10: a lookup must not
  cost more in a larger store (the anchor is the same code, so the ratio is the cost of size).

Writes benchmarks/results/bench_store.json.
Runtime: ~1 minute on 2 cores (development estimate).

    python benchmarks/bench_store.py [--profiles 5000] [--pairs 7]
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

LOOKUP = """
import sys
from pgle.store.store import ProfileStore
p, _ = ProfileStore(sys.argv[1]).serve(sys.argv[2], jax="0.10.2", device_kind="H100")
assert p.instruction_count == 200
"""
BY_HAND = """
import json, os, sys
store, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
root = os.path.join(store, "profiles")
for fp in os.listdir(root):
    newest = None
    for name in sorted(os.listdir(os.path.join(root, fp))):
        if name.endswith(".json"):
            with open(os.path.join(root, fp, name)) as f:
                meta = json.load(f)
            if meta["jax"] == "0.10.2" and meta["device_kind"] == "H100":
                newest = name[:-5]
    if newest:
        dst = os.path.join(out, fp + ".pbtxt")
        if os.path.exists(dst):
            os.unlink(dst)
        os.link(os.path.join(root, fp, newest + ".pbtxt"), dst)
"""


def build(path: Path, n: int) -> str:
    from pgle.profiles.files import Profile
    from pgle.store.store import ProfileStore

    st = ProfileStore(path, create=True)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    for i in range(n):
        st.add(f"{i:032x}", Profile([(f"fusion.{k}", float(k + i)) for k in range(200)]), jax="0.10.2",
               jaxlib="0.10.2", device_kind="H100", device_count=8, source="bench", now=now)
    return f"{n // 2:032x}"


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    ap.add_argument("--profiles", type=int, default=5_000)
    args = ap.parse_args()
    rec = h.Recorder("bench_store")
    env = h.python_env()
    with tempfile.TemporaryDirectory() as tmp:
        big, small = Path(tmp) / "big", Path(tmp) / "small"
        big_fp, small_fp = build(big, args.profiles), build(small, 10)
        ours, theirs = Path(tmp) / "view-pgle", Path(tmp) / "view-hand"
        pgle = h.Side("pgle store get", h.pgle_argv("store", "get", str(big), str(ours), "--device-kind",
                                                     "H100", "--jax", "0.10.2", "--force"), env=env)
        hand = h.Side("by hand", [sys.executable, "-c", BY_HAND, str(big), str(theirs)], env=env,
                      before=lambda: shutil.rmtree(theirs, ignore_errors=True))
        h.run_once(pgle)
        h.run_once(hand)
        if sorted(p.name for p in ours.iterdir()) != sorted(p.name for p in theirs.iterdir()):
            raise SystemExit("pgle store get and the hand-written view disagree")
        res = h.compare(hand, pgle, pairs=args.pairs)
        rec.figure("store_get", what=f"`pgle store get`, a store of {args.profiles:,} modules",
                   anchor="the same view made by hand in `python -c` (list, read metadata, hard-link)",
                   goal="–", value=res["ratio"], met=None, details=res)
        res = h.compare(
            h.Side("lookup, store of 10", [sys.executable, "-c", LOOKUP, str(small), small_fp], env=env),
            h.Side(f"lookup, store of {args.profiles}", [sys.executable, "-c", LOOKUP, str(big), big_fp],
                   env=env), pairs=args.pairs)
        rec.figure("store_lookup", what=f"one module's profile from a store of {args.profiles:,} "
                                        "(`ProfileStore.serve`, whole process)",
                   anchor="the same lookup in a store of 10", goal="–", value=res["ratio"], met=None,
                   details=res)
    rec.write()


if __name__ == "__main__":
    main()
