"""Test workload: records each signal it gets, in itself and in a child of its own (in its
process group), as a file `<role>.<SIGNAME>` in $SIGNAL_DIR; ticks a counter file while it runs.

SIGINT, SIGTERM and SIGHUP are caught and end the process with exit 0 (what a training loop
that saves on Ctrl-C does); SIGUSR1/SIGUSR2 are recorded and the run goes on. IGNORE_SIGTERM=1
ignores SIGTERM instead (as jax does after jax.distributed.initialize()). `ready` holds the two
pids once both have their handlers; the run ends when a file `finish` appears."""
import os
import signal
import subprocess
import sys
import time

d = os.environ["SIGNAL_DIR"]
role = sys.argv[1] if len(sys.argv) > 1 else "workload"
STOPPING = ("SIGINT", "SIGTERM", "SIGHUP")


def path(name: str) -> str:
    return os.path.join(d, name)


def write(name: str, text: str) -> None:
    with open(path(name) + ".tmp", "w") as f:
        f.write(text)
    os.replace(path(name) + ".tmp", path(name))


def record(signum, frame):
    name = signal.Signals(signum).name
    write(f"{role}.{name}", str(os.getpid()))
    if name in STOPPING:
        sys.exit(0)


for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
    if sig == signal.SIGTERM and os.environ.get("IGNORE_SIGTERM") == "1":
        signal.signal(sig, signal.SIG_IGN)
    else:
        signal.signal(sig, record)

child = None
if role == "workload":
    child = subprocess.Popen([sys.executable, __file__, "grandchild"])  # same process group
    while not os.path.exists(path("grandchild.ready")):
        time.sleep(0.01)
    write("ready", f"{os.getpid()} {child.pid}")
else:
    write("grandchild.ready", str(os.getpid()))

tick = 0
while not os.path.exists(path("finish")):
    tick += 1
    write(f"{role}.ticks", str(tick))
    time.sleep(0.02)
if child is not None:
    child.wait()
print(f"{role} finished", flush=True)
