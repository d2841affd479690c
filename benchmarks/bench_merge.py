"""`pgle merge` as a whole process against jaxlib's `aggregate_profiled_instructions` in a
`python -c` that reads the same files, aggregates and writes the result (imports included on
both sides), at 256 profiles x 20,000 instructions and 64 x 50,000.

The anchor is the C++ of `jax._src.lib._profiler.aggregate_profiled_instructions`
(docs/xla-facts.md section 2), the function JAX auto PGLE calls. pgle's side does what the
command does: reads and validates every input (a corrupt file is an error, not skipped),
checks the name overlap, merges by jaxlib's percentile rule, keeps latencies (jaxlib drops
them), writes atomically and reads the output back for the report. Before timing, both
outputs are checked to hold the same costs. Writes benchmarks/results/bench_merge.json.

    python benchmarks/bench_merge.py [--pairs 5] [--sizes 256x20000,64x50000]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

JAXLIB = """
import sys
from jax._src.lib import _profiler  # no public API; checked with jaxlib 0.10.2
out, pct, *paths = sys.argv[1:]
blobs = []
for p in paths:
    with open(p, "rb") as f:
        blobs.append(f.read())
data = _profiler.aggregate_profiled_instructions(blobs, int(pct))
with open(out, "wb") as f:
    f.write(data)
"""

KINDS = ("fusion", "loop_add_fusion", "input_reduce_fusion", "all-reduce-start", "all-reduce-done",
         "custom-call", "cublas-gemm", "copy-start", "wrapped_slice", "all-gather-start",
         "reduce-scatter", "bitcast_transpose_fusion", "triton_gemm_dot")


def realistic_names(n: int, rng: random.Random) -> list[str]:
    """Instruction names as XLA:GPU prints them: `<kind>.<N>`, a few `.remat` ones."""
    names = []
    for i in range(n):
        name = f"{KINDS[rng.randrange(len(KINDS))]}.{i}"
        if i % 97 == 0:
            name += ".remat2"
        names.append(name)
    return names


def generate(folder: Path, count: int, instructions: int) -> list[str]:
    from pgle.profiles.files import BINARY, Profile, encode_profile

    rng = random.Random(0)
    names = realistic_names(instructions, rng)
    base = [rng.lognormvariate(3, 1.5) for _ in names]
    paths = []
    for k in range(count):
        # Each rank's costs vary around the program's; a few ranks order names differently.
        costs = [(n, b * rng.uniform(0.8, 1.25)) for n, b in zip(names, base)]
        if k % 16 == 5:
            rng.shuffle(costs)
        p = folder / f"rank{k:03d}.pb"
        p.write_bytes(encode_profile(Profile(costs), BINARY))
        paths.append(str(p))
    return paths


def same_costs(a: Path, b: Path) -> bool:
    from pgle.profiles.files import read_profile

    return dict(read_profile(a).costs) == dict(read_profile(b).costs)


def main() -> None:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap)
    ap.add_argument("--sizes", default="256x20000,64x50000")
    ap.add_argument("--percentile", type=int, default=90)
    args = ap.parse_args()
    rec = h.Recorder("bench_merge")
    env = h.python_env()
    for size in args.sizes.split(","):
        count, instructions = map(int, size.split("x"))
        with tempfile.TemporaryDirectory() as d:
            paths = generate(Path(d), count, instructions)
            ours, theirs = Path(d) / "pgle.pb", Path(d) / "jaxlib.pb"
            jaxlib = h.Side("jaxlib aggregate_profiled_instructions",
                            [sys.executable, "-c", JAXLIB, str(theirs), str(args.percentile), *paths],
                            env=env)
            pgle = h.Side("pgle merge", h.pgle_argv("merge", "-o", str(ours), "--force",
                                                    "--percentile", str(args.percentile), *paths),
                          env=env)
            h.run_once(jaxlib)
            h.run_once(pgle)
            if not same_costs(ours, theirs):
                raise SystemExit(f"{size}: pgle merge and jaxlib disagree")
            res = h.compare(jaxlib, pgle, pairs=args.pairs)
            mb = round(sum(Path(p).stat().st_size for p in paths) / 1e6, 1)
        rec.figure(f"merge_{count}x{instructions}",
                   what=f"`pgle merge`, {count} profiles × {instructions:,} instructions "
                        "(whole process; costs only, as JAX writes them)",
                   anchor="jaxlib `aggregate_profiled_instructions` in `python -c` (drops latencies)",
                   goal="<= 1.0×", value=res["ratio"], met=res["ratio"]["median"] <= 1.0,
                   details=dict(res, input_mb=mb))
    rec.write()


if __name__ == "__main__":
    main()
