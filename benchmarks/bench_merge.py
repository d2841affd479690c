"""`pgle merge` as a whole process against jaxlib's `aggregate_profiled_instructions` in a
`python -c` that reads the same profiles, aggregates and writes the result (imports included
on both sides; both installed the way users install them: benchmarks/harness.py
`user_install`).

Cases (issue 25), each at 8, 80 and 800 ranks of 10,000 instructions:
- `names`: binary files whose names differ by 0.1% between ranks (a few instructions renamed
  per rank), some ranks in another order: the general case of ranks of one program;
- `folders`: per-module text folders, the default output of `pgle collect --per-module`
  (three modules of 10,000, 1,000 and 200 instructions, names differing as above). jaxlib
  reads no text: its side aggregates each module's ranks from the same profiles in binary
  (the strictest anchor: it parses no text);
and `same`: 256 binary files of 20,000 instructions with identical names (the case the old
fast path covered). Costs are what pgle's converter writes (a duration in picoseconds over
1e6), per rank within +-25% of the program's.

pgle's side does what the command does: reads and validates every input (a corrupt file is
an error, not skipped), checks the name overlap, merges by jaxlib's percentile rule, writes
atomically and reads the output back for the report. Before timing, both outputs must hold
the same costs. Memory: pgle's peak RSS over the input's size at 800 ranks (goal <= 1.5x);
`wait4` gives the larger of pgle's and its reading workers' (from 16 inputs on pgle reads in
worker processes, each holding a few inputs).
The time exponent over 8 -> 800 ranks must stay <= 1.2 (the benchmark fails otherwise).
Writes benchmarks/results/bench_merge.json. Runtime: ~8 minutes on 2 cores.

    python benchmarks/bench_merge.py [--pairs 5] [--ranks 8,80,800] [--instructions 10000]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import harness as h  # noqa: E402

JAXLIB = """
import json, sys
from jax._src.lib import _profiler  # no public API; checked with jaxlib 0.10.2
plan = json.load(open(sys.argv[1]))
for out, paths in plan["outputs"].items():
    blobs = []
    for p in paths:
        with open(p, "rb") as f:
            blobs.append(f.read())
    data = _profiler.aggregate_profiled_instructions(blobs, plan["percentile"])
    with open(out, "wb") as f:
        f.write(data)
"""

KINDS = ("fusion", "loop_add_fusion", "input_reduce_fusion", "all-reduce-start", "all-reduce-done",
         "custom-call", "cublas-gemm", "copy-start", "wrapped_slice", "all-gather-start",
         "reduce-scatter", "bitcast_transpose_fusion", "triton_gemm_dot")
MODULES = {"9f" * 16: 1.0, "1e" * 16: 0.1, "c4" * 16: 0.02}  # fingerprint -> share of instructions
RENAMED = 0.001  # per rank: names that differ from the other ranks'


def realistic_names(n: int, rng: random.Random) -> list[str]:
    """Instruction names as XLA:GPU prints them: `<kind>.<N>`, a few `.remat` ones."""
    names = []
    for i in range(n):
        name = f"{KINDS[rng.randrange(len(KINDS))]}.{i}"
        if i % 97 == 0:
            name += ".remat2"
        names.append(name)
    return names


def rank_profile(names, base, rng: random.Random, rank: int, renamed: float):
    from pgle.profiles.files import Profile

    costs = []
    for name, b in zip(names, base):
        if renamed and rng.random() < renamed:
            name = f"{name}.{rank}"
        # As pgle's converter writes them: a duration in picoseconds, / 1e3 / 1e3 (microseconds).
        costs.append((name, round(b * rng.uniform(0.8, 1.25) * 1e6) / 1e3 / 1e3))
    if rank % 16 == 5:  # some ranks list their instructions in another order
        rng.shuffle(costs)
    return Profile(costs)


def generate(folder: Path, case: str, ranks: int, instructions: int) -> dict:
    """Inputs for pgle (`inputs`) and jaxlib's plan (output -> binary inputs)."""
    from pgle.profiles.files import BINARY, TEXT, encode_profile

    rng = random.Random(0)
    binary = folder / "binary"
    binary.mkdir(parents=True)
    modules = {"": 1.0} if case != "folders" else MODULES
    programs = {fp: (realistic_names(max(1, int(instructions * share)), rng), None)
                for fp, share in modules.items()}
    programs = {fp: (names, [rng.lognormvariate(3, 1.5) for _ in names])
                for fp, (names, _) in programs.items()}
    renamed = 0.0 if case == "same" else RENAMED
    inputs, plan = [], {}
    for k in range(ranks):
        if case == "folders":
            rank_dir = folder / "ranks" / f"rank-{k:03d}"
            rank_dir.mkdir(parents=True)
            inputs.append(str(rank_dir))
        for fp, (names, base) in programs.items():
            profile = rank_profile(names, base, rng, k, renamed)
            blob = binary / f"{fp or 'file'}-{k:03d}.pb"
            blob.write_bytes(encode_profile(profile, BINARY))
            plan.setdefault(str(folder / "jaxlib" / f"{fp or 'merged'}.pb"), []).append(str(blob))
            if case == "folders":
                (rank_dir / f"{fp}.pbtxt").write_bytes(encode_profile(profile, TEXT))
            else:
                inputs.append(str(blob))
    (folder / "jaxlib").mkdir()
    size = sum(Path(p).stat().st_size for p in inputs) if case != "folders" else \
        sum(f.stat().st_size for p in inputs for f in Path(p).iterdir())
    return {"inputs": inputs, "plan": plan, "input_mb": size / 2**20}


def same_costs(case: str, ours: Path, plan: dict) -> bool:
    from pgle.profiles.files import load_profile_source, read_profile

    if case != "folders":
        return dict(read_profile(ours).costs) == dict(read_profile(next(iter(plan))).costs)
    merged = load_profile_source(ours).modules
    return all(dict(merged[Path(out).stem].costs) == dict(read_profile(out).costs) for out in plan)


def run_case(rec, user, case: str, ranks: int, instructions: int, pairs: int, percentile: int):
    with tempfile.TemporaryDirectory(prefix="bench-merge-") as d:
        folder = Path(d)
        # In a subprocess: the harness refuses to measure from a process that peaked high.
        subprocess.run([sys.executable, __file__, "--generate", str(folder), case, str(ranks),
                        str(instructions)], check=True)
        info = json.loads((folder / "info.json").read_text())
        plan_file = folder / "plan.json"
        plan_file.write_text(json.dumps({"outputs": info["plan"], "percentile": percentile}))
        ours = folder / ("merged" if case == "folders" else "merged.pb")
        env = user.env()
        jaxlib = h.Side("jaxlib aggregate_profiled_instructions",
                        [user.python, "-c", JAXLIB, str(plan_file)], env=env, cwd=user.cwd)
        pgle = h.Side("pgle merge", user.pgle_argv("merge", "-o", str(ours), "--force",
                                                  "--percentile", str(percentile), *info["inputs"]),
                      env=env, cwd=user.cwd)
        h.run_once(jaxlib)
        h.run_once(pgle)
        if not same_costs(case, ours, info["plan"]):
            raise SystemExit(f"{case} x {ranks}: pgle merge and jaxlib disagree")
        res = h.compare(jaxlib, pgle, pairs=pairs)
    res["input_mb"] = round(info["input_mb"], 1)
    what = {"names": f"`pgle merge`, {ranks} ranks × {instructions:,} instructions, names "
                     "differing by 0.1% between ranks (binary files)",
            "folders": f"`pgle merge`, {ranks} per-module text folders (3 modules, "
                       f"{instructions:,} + {instructions // 10:,} + {instructions // 50:,} "
                       "instructions, names differing by 0.1%)",
            "same": f"`pgle merge`, {ranks} profiles × {instructions:,} instructions, the same "
                    "names (binary files)"}[case]
    anchor = ("jaxlib `aggregate_profiled_instructions` per module in `python -c`, on the same "
              "profiles in binary" if case == "folders" else
              "jaxlib `aggregate_profiled_instructions` in `python -c` (drops latencies)")
    rec.figure(f"merge_{case}_{ranks}", what=what + " (whole process)", anchor=anchor,
               goal="<= 1.0×", value=res["ratio"], met=res["ratio"]["median"] <= 1.0, details=res)
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    h.pairs_arg(ap, default=5)
    ap.add_argument("--ranks", default="8,80,800")
    ap.add_argument("--instructions", type=int, default=10_000)
    ap.add_argument("--percentile", type=int, default=90)
    ap.add_argument("--generate", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        folder, case, ranks, instructions = args.generate
        info = generate(Path(folder), case, int(ranks), int(instructions))
        (Path(folder) / "info.json").write_text(json.dumps(info))
        return 0
    user = h.user_install()
    rec = h.Recorder("bench_merge")
    ranks = [int(r) for r in args.ranks.split(",")]
    failures = []
    for case in ("names", "folders"):
        results = {r: run_case(rec, user, case, r, args.instructions, args.pairs, args.percentile)
                   for r in ranks}
        big = results[max(ranks)]
        memory = {k: v / big["input_mb"] for k, v in big["subject_rss_mb"].items()}
        rec.figure(f"merge_{case}_memory", what=f"peak RSS of that merge at {max(ranks)} ranks "
                   f"({big['input_mb']:.0f} MB of input)", anchor="the input's size",
                   goal="<= 1.5×", value=memory, unit="x-size", met=memory["median"] <= 1.5,
                   details={"subject_rss_mb": big["subject_rss_mb"], "input_mb": big["input_mb"],
                            "jaxlib_rss_mb": big["anchor_rss_mb"]})
        if len(ranks) > 1:
            lo, hi = min(ranks), max(ranks)
            # Per pair: the k-th run at the largest size against the k-th at the smallest.
            per_pair = [math.log(b[1] / a[1]) / math.log(hi / lo)
                        for a, b in zip(results[lo]["pairs_s"], results[hi]["pairs_s"])]
            slope = h.spread(per_pair)
            met = slope["median"] <= 1.2
            rec.figure(f"merge_{case}_exponent", what=f"growth of that merge's time, {lo} -> {hi} "
                       "ranks (exponent of a power law; 1 = linear)", anchor="–",
                       goal="<= 1.2", value=slope, unit="", met=met,
                       details={r: results[r]["subject_s"] for r in ranks})
            if not met:
                failures.append(f"merge ({case}) grows as ranks^{slope['median']:.2f}")
    run_case(rec, user, "same", 256, 20_000, args.pairs, args.percentile)
    rec.write()
    if failures:
        print("FAILED: " + "; ".join(failures) + " (more than ranks^1.2)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
