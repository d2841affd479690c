"""Test workload: reports what it received (argv, XLA_FLAGS, sys.path[0]) as JSON on stdout."""
import json
import os
import sys

print("ECHO " + json.dumps({
    "argv": sys.argv,
    "xla_flags": os.environ.get("XLA_FLAGS"),
    "tf_cpp_min_log_level": os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
    "tf_cpp_log_thread_id": os.environ.get("TF_CPP_LOG_THREAD_ID"),
    "path0": sys.path[0],
    "name": __name__,
    "unbuffered": os.environ.get("PYTHONUNBUFFERED"),
    "stdout_tty": os.isatty(1),
    "stderr_tty": os.isatty(2),
    "size": list(os.get_terminal_size(1)) if os.isatty(1) else None,
}), flush=True)
code = int(os.environ.get("ECHO_EXIT", "0"))
sys.exit(code)
