"""Training loops as people write them, timing themselves (issue 33): the loop's own time per
step is the oracle pgle's step times are checked against. With --marked, each step (the
training call) runs inside `jax.profiler.StepTraceAnnotation("train", step_num=i)`.

  --form mnist      jax's mnist_classifier.py: `jit(update)` over batches, never waited on
                    inside an epoch; the epoch ends on `float(accuracy)`
  --form donated    `@jax.jit(donate_argnums=0)` step on a state dict, unsynced; each epoch
                    ends on `jax.block_until_ready(state)`
  --form matmul     a 4-matmul step, `x = step(x)` --steps times, one sync at the end
  --form log        `float(loss)` logged every --every steps, nothing else waits
  --form eval       jax's spmd_mnist: an unsynced `jit(train_step)`, a cheap `jit(accuracy)`
                    read with float() every --every steps (it absorbs the queued steps' time)
  --form synced     the 4-matmul step waited on each step (`.block_until_ready()` inside the
                    step): every step is its own synced segment
  --form late       a cheap `jit(warmup)` called --steps times (unsynced, one sync), then the
                    4-matmul `jit(step)` --steps times: the step is found late, after another
                    function led the count; only the step's loop is timed
  --form host       Python-bound: each step builds its batch on the host (numpy and Python,
                    ~5 ms), runs a tiny `jit(train_step)` and logs `float(loss)`: the device
                    work is a small part of the step; every step is its own synced segment

Writes {"form", "per_step_s": [...], "median_s", "segments": [[t0, t1, steps, last], ...]} to
--oracle: the loop's own time per step, one value per synced segment (a segment's wall time over
its steps; the first segment, with the compile, is left out), and each segment's time.time()
edges and (with --marked) the number of its last marked step, so that a test can set pgle's
step times of the same steps beside it.
Usage: loop_timing.py --form F [--steps N] [--every N] [--size N] [--marked] --oracle FILE
"""
import argparse
import contextlib
import json
import statistics
import time

import jax
import jax.numpy as jnp

parser = argparse.ArgumentParser()
parser.add_argument("--form", required=True,
                    choices=["mnist", "donated", "matmul", "log", "eval", "synced", "host",
                             "late"])
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--every", type=int, default=5)
parser.add_argument("--size", type=int, default=384)
parser.add_argument("--marked", action="store_true")
parser.add_argument("--oracle", required=True)
args = parser.parse_args()
marks = [0]  # marked steps entered so far


def marked():
    """The step's marker (--marked), numbered in call order from 0."""
    if args.marked:
        marks[0] += 1
        return jax.profiler.StepTraceAnnotation("train", step_num=marks[0] - 1)
    return contextlib.nullcontext()


n, every = args.size, args.every
key = jax.random.PRNGKey(0)
segments = []  # (seconds, steps, wall t0, wall t1) of each synced segment after the first


def mlp_params(sizes):
    keys = jax.random.split(key, len(sizes))
    return [(jax.random.normal(k, (a, b)) / a**0.5, jnp.zeros(b))
            for k, a, b in zip(keys, sizes[:-1], sizes[1:])]


def predict(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss_fn(params, batch):
    x, y = batch
    logits = predict(params, x)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=1))


x = jax.random.normal(key, (2 * n, n))
y = jax.nn.one_hot(jnp.arange(2 * n) % 10, 10)


def segment(t0, steps):
    now = time.perf_counter()
    if steps:
        wall = time.time()
        segments.append((now - t0, steps, wall - (now - t0), wall, marks[0] - 1))


if args.form in ("mnist", "eval"):
    params = mlp_params([n, n, n, 10])

    @jax.jit
    def update(params, batch):
        grads = jax.grad(loss_fn)(params, batch)
        return [(w - 0.01 * dw, b - 0.01 * db) for (w, b), (dw, db) in zip(params, grads)]

    @jax.jit
    def accuracy(params, batch):
        x, y = batch
        return jnp.mean(jnp.argmax(predict(params, x), 1) == jnp.argmax(y, 1))

    small = (x[: n // 8], y[: n // 8])
    epochs = args.steps // every
    for epoch in range(epochs):
        t0 = time.perf_counter()
        for _ in range(every):
            with marked():
                params = update(params, (x, y))
        # the epoch's only wait; on a small batch, as an eval between train steps is cheap
        acc = float(accuracy(params, small))
        if epoch:
            segment(t0, every)
elif args.form == "donated":
    state = {"w": jax.random.normal(key, (n, n)) / n**0.5, "step": jnp.zeros((), jnp.int32)}

    @jax.jit(donate_argnums=0)
    def train_step(state, x):
        w = state["w"]
        for _ in range(3):
            w = w - 0.001 * jnp.tanh(x @ w).T @ x / x.shape[0]
        return {"w": w, "step": state["step"] + 1}

    for epoch in range(args.steps // every):
        t0 = time.perf_counter()
        for _ in range(every):
            with marked():
                state = train_step(state, x)
        jax.block_until_ready(state)
        if epoch:
            segment(t0, every)
elif args.form in ("matmul", "synced"):
    w = [jax.random.normal(jax.random.PRNGKey(i), (n, n)) / n**0.5 for i in range(4)]

    @jax.jit
    def step(a):
        for m in w:
            a = jnp.tanh(a @ m)
        return a

    with marked():
        a = jax.block_until_ready(step(x))  # compile
    if args.form == "synced":
        for _ in range(args.steps):
            t0 = time.perf_counter()
            with marked():
                a = step(a).block_until_ready()
            segment(t0, 1)
    else:
        t0 = time.perf_counter()
        for _ in range(args.steps):
            with marked():
                a = step(a)
        jax.block_until_ready(a)
        segment(t0, args.steps)
elif args.form == "late":
    w = [jax.random.normal(jax.random.PRNGKey(i), (n, n)) / n**0.5 for i in range(4)]

    @jax.jit
    def warmup(a):
        return a * 0.5 + 1.0

    @jax.jit
    def step(a):
        for m in w:
            a = jnp.tanh(a @ m)
        return a

    a = x[:16, :16]
    for _ in range(args.steps):
        a = warmup(a)
    jax.block_until_ready(a)
    a = jax.block_until_ready(step(x))  # compile
    t0 = time.perf_counter()
    for _ in range(args.steps):
        a = step(a)
    jax.block_until_ready(a)
    segment(t0, args.steps)
elif args.form == "host":
    import numpy as np

    rng = np.random.default_rng(0)
    w = jnp.zeros((32, 10))

    @jax.jit
    def train_step(w, xb, yb):
        loss, g = jax.value_and_grad(lambda w: jnp.mean((xb @ w - yb) ** 2))(w)
        return w - 0.01 * g, loss

    def batch():
        """The host's share of a step: a batch put together in Python and numpy."""
        rows = [rng.standard_normal(32) for _ in range(256)]
        acc = 0
        for i in range(100_000):  # e.g. tokenizing, augmenting: pure Python
            acc += i & 7
        xb = np.stack(rows)
        return xb, np.tile(xb[:, :10], 1) + acc * 1e-9

    w, loss = train_step(w, *batch())  # compile
    print(f"loss {float(loss):.4f}", flush=True)
    t0 = time.perf_counter()
    for i in range(args.steps):
        with marked():
            w, loss = train_step(w, *batch())
        print(f"step {i} loss {float(loss):.4f}", flush=True)
        segment(t0, 1)
        t0 = segments[-1][0] + t0  # the next step starts where this one ended
else:  # log
    params = mlp_params([n, n, n, 10])

    @jax.jit
    def train_step(params, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        new = [(w - 0.01 * dw, b - 0.01 * db) for (w, b), (dw, db) in zip(params, grads)]
        return new, loss

    t0 = time.perf_counter()
    for i in range(args.steps):
        with marked():
            params, loss = train_step(params, (x, y))
        if (i + 1) % every == 0:
            print(f"step {i + 1} loss {float(loss):.4f}", flush=True)
            if i + 1 > every:
                segment(t0, every)
            t0 = time.perf_counter()

per_step = [s / k for s, k, *_ in segments]
with open(args.oracle, "w") as f:
    json.dump({"form": args.form, "per_step_s": per_step,
               "median_s": statistics.median(per_step),
               "segments": [[a, b, k, last] for _, k, a, b, last in segments]}, f)
