"""Test workload: real JAX on CPU, plus the XLA:GPU log lines a GPU run would print.

A REPLAY, kept only where no real compiler can run: pgle's whole workflows (run, collect,
store serving, ranks) on a CPU, end to end. XLA:CPU never reads a PGLE profile, so this
script prints, on stderr, the lines XLA:GPU prints for the profile path it actually received
in XLA_FLAGS, for its real jitted modules, logged from its own compiling thread (and a second
one, as parallel compiles log). Every line is a REAL line the XLA:GPU compiler printed in the
lane (tests/data/xla_gpu/<jax>/<scenario>.log; tests/workloads/real_xla_lines.py): wording,
source file:line and prefix as captured; only the path, thread id, module name and id,
fingerprint, counts and instruction names are replaced, and a line shows only where XLA
would show it (TF_CPP_MIN_LOG_LEVEL, TF_CPP_VMODULE for the VLOG lines, TF_CPP_LOG_THREAD_ID
for a tsl prefix's thread id). What is not real: that these modules printed them (their
instruction names and counts are the test's), and the second thread's id. pgle counts these
lines only because the test runs it with tests/helpers/replayed_gpu_run
(tests/helpers/pgle_testing.pgle_env adds it for REPLAY_* variables): a CPU run printing
XLA:GPU lines is otherwise not_applicable.

REPLAY_SCENARIO (the captured log each one's lines come from):
  applied | partial   good-pbtxt.log per module, then partial-warn.log's accuracy-checker
                      block for jit_train_step (38 found / 2 missing | 5 / 15)
  discard             partial's lines, then runtime-error.log's `Found N missing instructions.
                      Discarding the profile.`
  collectives         applied's lines, the train step missing 1 fusion and `all-gather-start.1`
  sync_converted      applied's lines, the train step missing 1 fusion and `all-reduce-start`,
                      as on jax >= 0.11.1 where XLA made the all-reduce synchronous after
                      scheduling under a new name; with REPLAY_PSUM=1 the train step really runs
                      a (synchronous) psum over the CPU devices
                      (XLA_FLAGS=--xla_force_host_platform_device_count=8), so the executed
                      module pgle's harness keeps holds an all-reduce and no `all-reduce-start`
  directory           REPLAY_FP_TRAIN, REPLAY_FP_EVAL: the train module's <fp>.pb is found
                      (dir-pb.log's lookup), nothing of the eval module's (dir-some-missing.log)
  lookup              REPLAY_FPS=name:fp,...: each module's fingerprint, then XLA's directory
                      lookup (<dir>/<fp>.pbtxt, then .pb) answered from the files really there
  parse_error         garbage-pb.log's parse failure;  file_missing: absent.log's line
  none                nothing
REPLAY_PREFIX: absl (jax >= 0.7.2; lines of jax 0.10.2) | tsl (older; lines of jax 0.6.2)
REPLAY_EVAL_FIRST=1: the eval step's block comes first (XLA finished its compile first)
REPLAY_JAX: the captured version to take the lines from instead (e.g. 0.5.3, 0.9.2)
"""

import os
import re
import sys
import threading

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import real_xla_lines

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


# The replay's own thread (the one that compiled) and a second one, as two modules compiling
# in parallel threads log them.
T1 = threading.get_native_id()
T2 = T1 + 1
cap = real_xla_lines.Captured(os.environ.get("REPLAY_JAX") or real_xla_lines.default_version(style))
FP_TRAIN = os.environ.get("REPLAY_FP_TRAIN", "fe8bd59d0f5f8ed3e9de8db97e1ec5eb")
FP_EVAL = os.environ.get("REPLAY_FP_EVAL", "5b555cdb08fb9a8f6afa7168fd9efe6c")
out: list[tuple[int, real_xla_lines.Line]] = []  # (thread id, line)


def interleave(a: list, b: list) -> list:
    """Two modules compiling in parallel threads: their lines interleave."""
    merged = []
    for i in range(max(len(a), len(b))):
        merged += a[i:i + 1] + b[i:i + 1]
    return merged


if path is not None and scenario in ("applied", "partial", "discard", "collectives",
                                     "sync_converted"):
    found, n_missing = {"partial": (5, 15), "discard": (5, 15)}.get(scenario, (38, 2))
    missing = [f"fusion.{i}" for i in range(n_missing)]
    if scenario == "collectives":
        missing[-1] = "all-gather-start.1"
    elif scenario == "sync_converted":
        missing[-1] = "all-reduce-start"
    train = [(T1, ln) for ln in real_xla_lines.module_read(
        cap, path=path, module="jit_train_step", module_id=1, fp=FP_TRAIN, found=found,
        missing=missing)]
    evals = [(T2, ln) for ln in real_xla_lines.module_read(
        cap, path=path, module="jit_eval_step", module_id=2, fp=FP_EVAL)]
    out += interleave(evals, train) if os.environ.get("REPLAY_EVAL_FIRST") else \
        interleave(train, evals)
    if scenario == "discard":
        out.append((T1, cap.first("runtime-error", real_xla_lines.DISCARD).fill(
            real_xla_lines.DISCARD, n=n_missing)))
elif path is not None and scenario == "directory":
    # XLA looks up <dir>/<fingerprint>.pbtxt, then .pb, per module (jax >= 0.6.1 logs misses):
    # here the train module's .pb exists and nothing of the eval module's.
    train = real_xla_lines.directory_lookup(
        cap, directory=path, module="jit_train_step", module_id=1, fp=FP_TRAIN,
        exists=lambda f: f.endswith(f"{FP_TRAIN}.pb"))
    evals = real_xla_lines.directory_lookup(
        cap, directory=path, module="jit_eval_step", module_id=2, fp=FP_EVAL,
        exists=lambda f: False)
    out += [(T1, ln) for ln in train] + [(T2, ln) for ln in evals]
elif scenario == "lookup":
    for n, item in enumerate(os.environ.get("REPLAY_FPS", "").split(",")):
        if not item:
            continue
        name, fp = item.split(":")
        if path is None:  # no profile flag: only the fingerprint line
            out.append((T1 + n, cap.first("good-pbtxt", real_xla_lines.FINGERPRINT).fill(
                real_xla_lines.FINGERPRINT, module=name, id=1, fp=fp)))
            continue
        out += [(T1 + n, ln) for ln in real_xla_lines.directory_lookup(
            cap, directory=path, module=name, module_id=1, fp=fp, exists=os.path.isfile)]
elif path is not None and scenario == "parse_error":
    captured = real_xla_lines.captured_profile_path(cap, "garbage-pb")
    out.append((T1, real_xla_lines.literal(cap, "garbage-pb", "parse|read|Unable", captured,
                                           path)))
elif path is not None and scenario == "file_missing":
    out.append((T1, cap.first("absent", real_xla_lines.NOT_EXIST).fill(
        real_xla_lines.NOT_EXIST, path=path)))
printed = [ln.render(tid) for tid, ln in out]
print("\n".join(p for p in printed if p is not None), file=sys.stderr, flush=True)
print(f"replayed {scenario} ({style})", flush=True)
