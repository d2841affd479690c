"""Test workload: signals readiness through a file, then waits to be interrupted."""
import os
import sys
import time

ready = os.environ["READY_FILE"]
try:
    open(ready, "w").close()
    time.sleep(60)
except KeyboardInterrupt:
    with open(ready + ".interrupted", "w") as f:
        f.write("yes")
    raise
sys.exit(0)
