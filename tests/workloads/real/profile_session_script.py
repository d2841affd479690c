"""A training loop (jax only) that profiles itself, in each of the ways jax offers:

  --mode start-trace   jax.profiler.start_trace(DIR) at one step, stop_trace() a few later
                       (MaxText `profiler: xplane`, levanter `--profiler`)
  --mode trace         `with jax.profiler.trace(DIR) as s:` around a few steps; prints what
                       the context manager yielded (jax >= 0.12: the ProfileSession; older: None)
  --mode session       jax >= 0.12: `s = jax.profiler.ProfileSession(log_dir=DIR); s.start()`,
                       later `s.stop()`
  --mode session-memory  jax >= 0.12: a ProfileSession without log_dir (the trace stays in
                       memory); prints how many planes it holds after stop()
  --mode session-thread  jax >= 0.12: --mode session, its start() and stop() called in a
                       thread of the script's own (a profiling thread)
  --mode none          no profiler of its own (pgle's window is the only one)

Usage: profile_session_script.py --mode M [--profile-dir DIR] [--steps N] [--profile-start S]
       [--profile-steps K]
"""
import argparse

import jax
import jax.numpy as jnp

parser = argparse.ArgumentParser()
parser.add_argument("--mode", required=True,
                    choices=("start-trace", "trace", "session", "session-memory", "session-thread", "none"))
parser.add_argument("--profile-dir")
parser.add_argument("--steps", type=int, default=8)
parser.add_argument("--profile-start", type=int, default=3)
parser.add_argument("--profile-steps", type=int, default=3)
args = parser.parse_args()


@jax.jit
def train_step(w, x):
    loss = jnp.mean((jnp.tanh(x @ w) - 1.0) ** 2)
    return w - 0.1 * jax.grad(lambda w_: jnp.mean((jnp.tanh(x @ w_) - 1.0) ** 2))(w), loss


state = {"w": jnp.ones((16, 16)) * 0.01}
x = jnp.ones((8, 16))


def run(steps: range) -> None:
    for step in steps:
        state["w"], loss = train_step(state["w"], x)
        jax.block_until_ready(loss)
        print(f"step {step} loss {float(loss):.4f}", flush=True)


first, end = args.profile_start, args.profile_start + args.profile_steps
run(range(first))
if args.mode == "none":
    run(range(first, end))
elif args.mode == "start-trace":
    jax.profiler.start_trace(args.profile_dir)
    run(range(first, end))
    jax.profiler.stop_trace()
elif args.mode == "trace":
    with jax.profiler.trace(args.profile_dir) as s:
        session_type = getattr(jax.profiler, "ProfileSession", None)
        print(f"trace yielded: {type(s).__name__} (a ProfileSession: "
              f"{session_type is not None and isinstance(s, session_type)})", flush=True)
        run(range(first, end))
elif args.mode == "session-thread":
    import threading

    def in_thread(call) -> None:
        thread = threading.Thread(target=call)
        thread.start()
        thread.join()

    session = jax.profiler.ProfileSession(log_dir=args.profile_dir)
    in_thread(lambda: session.start())
    run(range(first, end))
    in_thread(lambda: session.stop())
else:
    session = jax.profiler.ProfileSession(
        log_dir=args.profile_dir if args.mode == "session" else None)
    session.start()
    run(range(first, end))
    data = session.stop()
    if args.mode == "session-memory":
        print(f"in-memory profile planes: {len(list(data.planes)) if data else 0}", flush=True)
run(range(end, args.steps))
