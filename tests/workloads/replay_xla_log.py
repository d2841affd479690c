"""Test workload: real JAX on CPU, plus the XLA:GPU log lines a GPU run would print.

A REPLAY, kept only where no real compiler can run: pgle's whole workflows (run, collect,
store serving, ranks) on a CPU, end to end. XLA:CPU never reads a PGLE profile, so this
script replays, on stderr, lines shaped like XLA:GPU's (the wordings of gpu_hlo_schedule.cc
and profile_guided_latency_estimator.cc) for the profile path it actually received in
XLA_FLAGS, for its two real jitted modules, logged from its own compiling thread. What the
real compiler prints for each case (interleaved checker blocks from parallel compiles, the
XlaRuntimeError line, directory lookups, every jax version) is captured in
tests/data/xla_gpu/ and judged by tests/evidence/; pgle counts these lines only because the
test runs it with tests/helpers/replayed_gpu_run (tests/helpers/pgle_testing.pgle_env adds
it for REPLAY_* variables): a CPU run printing XLA:GPU lines is otherwise not_applicable.

REPLAY_SCENARIO: applied | partial | collectives | sync_converted | directory | lookup | parse_error | file_missing | none | old_wording | discard
  collectives: the train step misses 1 fusion and 1 all-gather of 40 (coverage 95 %).
  sync_converted: the train step misses 1 fusion and `all-reduce-start` of 40, as on jax >=
    0.11.1 where XLA made the all-reduce synchronous after scheduling under a new name; with
    REPLAY_PSUM=1 the train step really runs a (synchronous) psum over the CPU devices
    (XLA_FLAGS=--xla_force_host_platform_device_count=8), so the executed module pgle's
    harness keeps holds an all-reduce and no `all-reduce-start`.
  lookup: each module's fingerprint (REPLAY_FPS=name:fp,...), then XLA's directory lookup
  (<dir>/<fp>.pbtxt, then .pb) answered from the files that really are in the directory.
REPLAY_PREFIX: absl (jax >= 0.7.2) | tsl (older)
"""

import os
import re
import sys
import threading

import jax
import jax.numpy as jnp

scenario = os.environ.get("REPLAY_SCENARIO", "applied")
style = os.environ.get("REPLAY_PREFIX", "absl")
m = re.search(r"--xla_gpu_pgle_profile_file_or_directory_path=(\"[^\"]*\"|'[^']*'|\S+)", os.environ.get("XLA_FLAGS", ""))
path = m.group(1).strip("\"'") if m else None  # XLA logs the path unquoted


@jax.jit
def train_step(x):
    return (x @ x.T).sum()


if os.environ.get("REPLAY_PSUM"):
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((len(jax.devices()),), ("x",))

    def train_step(x):  # the same module name (jit_train_step), with a collective
        return jax.shard_map(lambda v: jax.lax.psum((v @ v.T).sum(), "x"), mesh=mesh,
                             in_specs=P("x"), out_specs=P())(x)
    train_step = jax.jit(train_step)


@jax.jit
def eval_step(x):
    return jnp.tanh(x).mean()


x = jnp.ones((16, 16))
if os.environ.get("REPLAY_PSUM"):
    x = jax.device_put(x, NamedSharding(mesh, P("x")))
for i in range(3):
    with jax.profiler.StepTraceAnnotation("train", step_num=i):
        train_step(x).block_until_ready()
eval_step(x).block_until_ready()
# Every module the replay names is really compiled (pgle's harness sees the workload's
# compiles, and counts XLA lines only for those modules).
for item in os.environ.get("REPLAY_FPS", "").split(","):
    name = item.split(":")[0]
    if name.startswith("jit_") and name not in ("jit_train_step", "jit_eval_step"):
        def other(v):
            return v + 1
        other.__name__ = other.__qualname__ = name[len("jit_"):]
        jax.jit(other)(x).block_until_ready()


def line(sev, file, lineno, msg, tid):
    if style == "absl":
        return f"{sev}1122 04:33:12.{lineno:06d}  {tid} {file}:{lineno}] {msg}"
    # tsl's prefix; " %7u" thread id as printed with TF_CPP_LOG_THREAD_ID=1
    return (f"2026-11-22 04:33:12.{lineno:06d}: {sev} {tid:7d} "
            f"external/xla/xla/service/gpu/{file}:{lineno}] {msg}")


SCHED, PGLE = "gpu_hlo_schedule.cc", "profile_guided_latency_estimator.cc"
# The replay's own thread (the one that compiled) and a second one, as two modules compiling
# in parallel threads log them.
T1 = threading.get_native_id()
T2 = T1 + 1
out = []
if scenario in ("applied", "partial", "discard", "collectives", "sync_converted"):
    # Two modules compiling in parallel threads: their lines interleave.
    train_missing = {"applied": (38, 2), "partial": (5, 15), "discard": (5, 15),
                     "collectives": (38, 2), "sync_converted": (38, 2)}[scenario]
    found = [
        line("I", SCHED, 612, "Found profile for module jit_train_step, using profile guided latency estimator", T1),
        line("I", SCHED, 612, "Found profile for module jit_eval_step, using profile guided latency estimator", T2)]
    if os.environ.get("REPLAY_EVAL_FIRST"):  # XLA finished the eval step's compile first
        found.reverse()
    out += [
        line("I", SCHED, 538, f"Using PGLE profile from {path}", T1),
        line("I", SCHED, 538, f"Using PGLE profile from {path}", T2),
        *found,
        line("W", PGLE, 301, f"Found {train_missing[0]} instructions from the profile.", T1),
        line("W", PGLE, 303, f"Missing {train_missing[1]} instructions from the profile.", T1),
    ]
    names = [f"fusion.{i}" for i in range(train_missing[1])]
    if scenario == "collectives":
        names[-1] = "all-gather-start.1"
    elif scenario == "sync_converted":
        names[-1] = "all-reduce-start"
    out += [line("W", PGLE, 305, f"  {name}", T1) for name in names]
    if scenario == "discard":
        out.append("jaxlib.xla_extension.XlaRuntimeError: INVALID_ARGUMENT: Found 15 missing "
                   "instructions. Discarding the profile.")
elif scenario == "directory":
    # XLA looks up <dir>/<fingerprint>.pbtxt, then .pb, per module (jax >= 0.6.1 logs misses).
    fp_train, fp_eval = os.environ["REPLAY_FP_TRAIN"], os.environ["REPLAY_FP_EVAL"]
    out += [
        line("I", SCHED, 520, f"Fingerprint before LHS for module jit_train_step(1) = {fp_train}", T1),
        line("E", SCHED, 390, f"PGLE profile file does not exist: {path}/{fp_train}.pbtxt", T1),
        line("I", SCHED, 538, f"Using PGLE profile from {path}/{fp_train}.pb", T1),
        line("I", SCHED, 612, "Found profile for module jit_train_step, using profile guided latency estimator", T1),
        line("I", SCHED, 520, f"Fingerprint before LHS for module jit_eval_step(2) = {fp_eval}", T2),
        line("E", SCHED, 390, f"PGLE profile file does not exist: {path}/{fp_eval}.pbtxt", T2),
        line("E", SCHED, 390, f"PGLE profile file does not exist: {path}/{fp_eval}.pb", T2),
    ]
elif scenario == "lookup":
    for n, item in enumerate(os.environ.get("REPLAY_FPS", "").split(",")):
        if not item:
            continue
        name, fp = item.split(":")
        tid = T1 + n
        out.append(line("I", SCHED, 520, f"Fingerprint before LHS for module {name}(1) = {fp}", tid))
        if path is None:
            continue
        for suffix in (".pbtxt", ".pb"):
            f = f"{path}/{fp}{suffix}"
            if os.path.isfile(f):
                out += [line("I", SCHED, 538, f"Using PGLE profile from {f}", tid),
                        line("I", SCHED, 612, f"Found profile for module {name}, using profile "
                                              "guided latency estimator", tid)]
                break
            out.append(line("E", SCHED, 390, f"PGLE profile file does not exist: {f}", tid))
elif scenario == "parse_error":
    out.append(line("E", SCHED, 400, f"Tried but failed to parse PGLE proto from binary file "
                                     f"'{path}'. Error message: truncated message", T1))
elif scenario == "file_missing":
    out.append(line("E", SCHED, 390, f"PGLE profile file does not exist: {path}", T1))
elif scenario == "old_wording":
    out += [
        line("I", SCHED, 478, f"Using PGLE profile from {path}", T1),
        line("I", SCHED, 573, "Found profile, using profile guided latency estimator", T1),
    ]
print("\n".join(out), file=sys.stderr, flush=True)
print(f"replayed {scenario} ({style})", flush=True)
